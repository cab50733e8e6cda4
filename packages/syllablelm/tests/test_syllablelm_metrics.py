"""Metric values on hand-built cases."""

from __future__ import annotations

import numpy as np
import pytest

from iclr25.syllablelm.metrics import bitrate, boundary_scores, clustering_scores, r_value, tune_shift


def test_boundary_hand_case():
    s = boundary_scores([0.12, 0.20, 0.36, 0.50, 0.56, 0.81], [0.10, 0.30, 0.52, 0.80], tolerance=0.05)
    assert s["precision"] == pytest.approx(0.5)
    assert s["recall"] == pytest.approx(0.75)
    assert s["f1"] == pytest.approx(0.6)
    assert s["os"] == pytest.approx(0.5)
    assert s["r_value"] == pytest.approx(0.455326, abs=1e-6)


def test_r_value_values():
    assert r_value(0.8, 0.6) == pytest.approx(0.711117, abs=1e-6)
    assert r_value(1.0, 1.0) == pytest.approx(1.0)


def test_one_to_one_matching_and_corpus_pooling():
    # two predictions near one reference: only one hit
    s = boundary_scores([0.50, 0.52], [0.51], tolerance=0.05)
    assert s["hits"] == 1 and s["precision"] == pytest.approx(0.5) and s["recall"] == pytest.approx(1.0)
    c = boundary_scores([[0.1, 0.5], [0.3]], [[0.1], [0.3, 0.9]])
    assert (c["hits"], c["n_pred"], c["n_ref"]) == (2, 3, 3)


def test_notebook_epsilon():
    s = boundary_scores([0.1, 0.2], [0.1, 0.2], eps=1e-5)
    assert s["precision"] == pytest.approx(1 + 1e-5)


def test_tune_shift_finds_offset():
    rng = np.random.default_rng(0)
    refs = [np.sort(rng.uniform(0, 5, 20)) for _ in range(4)]
    preds = [r - 0.03 for r in refs]
    shift, sc = tune_shift(preds, refs, tolerance=0.004)
    assert shift == pytest.approx(0.03)
    assert sc["f1"] == pytest.approx(1.0)


def test_clustering_bijection_is_perfect():
    ref = [(0.0, 0.2, "ba"), (0.2, 0.4, "ki"), (0.4, 0.6, "ba"), (0.6, 0.8, "mo")]
    units = [(0.0, 0.21, 7), (0.21, 0.39, 3), (0.39, 0.6, 7), (0.6, 0.8, 1)]
    s = clustering_scores(units, ref)
    assert s["cluster_purity"] == pytest.approx(1.0)
    assert s["syllable_purity"] == pytest.approx(1.0)
    assert s["snmi"] == pytest.approx(1.0)


def test_clustering_one_unit_for_everything():
    ref = [(0.0, 0.2, "ba"), (0.2, 0.4, "ki")]
    s = clustering_scores([(0.0, 0.4, 5)], ref)
    assert s["cluster_purity"] == pytest.approx(0.5)
    assert s["syllable_purity"] == pytest.approx(1.0)
    assert s["snmi"] == pytest.approx(0.0)


def test_bitrate():
    rng = np.random.default_rng(0)
    units = rng.integers(0, 4096, size=50)
    b = bitrate(units, 10.0, vocab_size=4096)
    assert b["tokens_per_second"] == pytest.approx(5.0)
    assert b["storage_bps"] == pytest.approx(60.0)
    assert b["entropy_bps"] <= b["storage_bps"]
    with pytest.raises(ValueError):
        bitrate(units, 0.0)
