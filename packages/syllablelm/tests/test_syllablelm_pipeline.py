"""End to end on a tiny synthetic corpus with the shipped encoder; CLI tokenize on a written WAV."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.io import wavfile

from iclr25.syllablelm.cli import main
from iclr25.syllablelm.losspred import losspred_segment
from iclr25.syllablelm.pipeline import PipelineConfig, format_table, run_pipeline
from iclr25.syllablelm.pretrain import load_small_hubert, save_small_hubert

pytest.importorskip("espeakng_loader")


@pytest.mark.integration
def test_tiny_pipeline_and_tokenize_cli(tmp_path):
    cfg = PipelineConfig(n_train=4, n_eval=2, sylboost_iters=1, sylboost_epochs=1, n_kmeans=8, n_units=4, batch_size=4)
    res = run_pipeline(cfg)
    names = [r["method"] for r in res.rows]
    assert names == ["uniform 5 Hz", "LossPred", "SSE, teacher feats", "SylBoost iter 1"]
    for r in res.rows:
        assert 0.0 <= r["f1"] <= 1.0 and r["seg_per_s"] > 0
    assert res.units["vocab"] == 4 and res.units["tokens_per_second"] > 0
    assert res.units["entropy_bps"] <= res.units["storage_bps"] + 1e-9
    assert "LossPred" in format_table(res)
    # the tokenizer and student round-trip through files, and the CLI writes JSON units
    res.tokenizer.save(tmp_path / "tokenizer.npz")
    save_small_hubert(res.student, tmp_path / "student.pt")
    wav = (np.sin(np.linspace(0, 400, 24000)) * 8000).astype(np.int16)
    wavfile.write(tmp_path / "a.wav", 16000, wav)
    out = tmp_path / "units.json"
    assert main(["tokenize", str(tmp_path / "a.wav"), "--model", str(tmp_path), "--out", str(out)]) == 0
    units = json.loads(out.read_text())[str(tmp_path / "a.wav")]
    assert units and all(u["end"] > u["start"] for u in units)


def test_shipped_encoder_losspred_bounds():
    teacher = load_small_hubert()
    wav = torch.randn(16000 * 2) * 0.05
    borders = losspred_segment(teacher, wav, num_segments=7)
    assert borders[0] == 0 and borders[-1] == teacher.num_frames(len(wav)) and len(borders) == 8
    assert (torch.diff(borders) >= 1).all() and (torch.diff(borders) <= 49).all()
