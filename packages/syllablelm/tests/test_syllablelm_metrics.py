"""Metric values on hand-built cases."""

from __future__ import annotations

import numpy as np
import pytest

from iclr25.syllablelm.metrics import (
    bitrate,
    boundary_scores,
    clustering_scores,
    protocol_boundaries,
    r_value,
    tune_shift,
)


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


# --- boundary protocols: both sides reduced the same way -------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["official", "interior"])
def test_same_boundaries_on_both_sides_score_one(protocol):
    b = [0.0, 0.21, 0.47, 0.80, 1.13]
    s = boundary_scores(b, list(b), protocol=protocol)
    assert s["f1"] == pytest.approx(1.0) and s["precision"] == pytest.approx(1.0) and s["recall"] == 1.0
    corpus = [[0.05, 0.3, 0.7], [0.0, 0.4, 0.9, 1.2]]
    assert boundary_scores(corpus, [list(c) for c in corpus], protocol=protocol)["f1"] == pytest.approx(1.0)


def test_official_is_the_default_and_interior_drops_both_ends_on_both_sides():
    pred, ref = [0.0, 0.30, 0.60, 1.00], [0.02, 0.31, 0.90, 1.00]
    off = boundary_scores(pred, ref)
    assert (off["hits"], off["n_pred"], off["n_ref"]) == (3, 4, 4)  # 0/0.02, 0.30/0.31, 1.00/1.00
    assert off == boundary_scores(pred, ref, protocol="official")
    inner = boundary_scores(pred, ref, protocol="interior")
    assert (inner["hits"], inner["n_pred"], inner["n_ref"]) == (1, 2, 2)  # [0.3, 0.6] vs [0.31, 0.9]
    assert protocol_boundaries(pred, "interior").tolist() == [0.30, 0.60]
    with pytest.raises(ValueError, match="protocol"):
        boundary_scores(pred, ref, protocol="zerospeech")
    shift, tuned = tune_shift([pred], [ref], protocol="interior")
    assert tuned["n_pred"] == 2 and tuned["n_ref"] == 2


def test_pipeline_scores_true_segments_as_perfect():
    """The demo's own reduction of predicted frame borders and reference syllables is symmetric: predicting exactly
    the true syllables (on the 50 Hz grid) gives F1 = 1 under both protocols (the old one dropped the predicted
    first and last border but kept the reference's, so this scored below 1)."""
    from iclr25.syllablelm.data.synth import Utterance
    from iclr25.syllablelm.pipeline import _score

    sylls = [(0.0, 0.24, "ba"), (0.24, 0.5, "ki"), (0.5, 0.9, "mot")]
    utt = Utterance(wav=np.zeros(16000, np.float32), sample_rate=16000, syllables=sylls)
    borders = np.round(utt.boundaries * 50).astype(int)
    for protocol in ("official", "interior"):
        row = _score("oracle", [borders], [utt], protocol)
        assert row["f1"] == pytest.approx(1.0) and row["recall"] == pytest.approx(1.0), protocol


def test_boundary_scores_rejects_2d_arrays():
    with pytest.raises(ValueError, match="2-D array is never a corpus|1-D"):
        boundary_scores(np.array([[0.1, 0.2], [0.3, 0.4]]), np.array([[0.1, 0.2], [0.3, 0.4]]))
    with pytest.raises(ValueError, match="1-D"):
        boundary_scores([np.array([[0.1, 0.2]])], [[0.1, 0.2]])
    with pytest.raises(ValueError, match="both"):
        boundary_scores([[0.1], [0.2]], [0.1, 0.2])  # a corpus against one utterance
