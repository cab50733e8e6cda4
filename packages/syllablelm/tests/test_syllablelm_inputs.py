"""Strict inputs: each bad input gets a clear error instead of a silent wrong answer."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch
from scipy.io import wavfile

from iclr25.syllablelm import (
    SylBoostTokenizer,
    SyllableLM,
    SyllableLMConfig,
    lm_state_to_fairseq,
    load_audio,
    load_fairseq_lm,
    losspred_segment,
    mincut_segment,
    ncut_costs,
    optimal_segmentation,
    read_textgrid,
    select_num_segments,
    sse_costs,
    sylboost_segment,
    write_textgrid,
)
from iclr25.syllablelm.cli import main
from iclr25.syllablelm.features import mfcc
from iclr25.syllablelm.kernels import segmental_dp
from iclr25.syllablelm.pretrain import load_small_hubert, save_small_hubert
from iclr25.syllablelm.vad import trim_silence


@pytest.fixture(scope="module")
def teacher():
    return load_small_hubert()


def _wav(seconds: float = 1.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    return (
        0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 4 * t)) + 0.01 * rng.standard_normal(len(t))
    ).astype(np.float32)


def _tokenizer(teacher) -> SylBoostTokenizer:
    centroids = np.random.default_rng(0).standard_normal((4, teacher.config.hidden_size)).astype(np.float32)
    return SylBoostTokenizer(lambda w: teacher.features(w, layer=-2)[0], centroids, delta=0.01)


# --- NaN / inf ---------------------------------------------------------------------------------------------------------


def test_nan_features_are_rejected_not_reported_as_infeasible():
    x = torch.randn(40, 8, dtype=torch.float64)
    x[17, 3] = float("nan")
    for fn in (
        lambda: sylboost_segment(x, delta=0.1),
        lambda: optimal_segmentation(x, 5),
        lambda: sse_costs(x),
    ):
        with pytest.raises(ValueError, match="NaN or infinite"):
            fn()
    x[17, 3] = float("inf")
    with pytest.raises(ValueError, match="NaN or infinite"):
        sylboost_segment(x, delta=0.1)
    # NaN in padding beyond ``lengths`` is ignored: batched result == the unpadded utterance
    good = torch.randn(30, 8, dtype=torch.float64)
    padded = torch.full((1, 40, 8), float("nan"), dtype=torch.float64)
    padded[0, :30] = good
    assert torch.equal(sylboost_segment(padded, delta=0.1, lengths=[30])[0], sylboost_segment(good, delta=0.1))


def test_nan_affinity_is_rejected():
    a = torch.rand(20, 20)
    a[4, 9] = float("nan")
    with pytest.raises(ValueError, match="affinity holds NaN"):
        mincut_segment(a, 3)
    with pytest.raises(ValueError, match="affinity holds NaN"):
        ncut_costs(a)


def test_nan_waveform_is_rejected_everywhere(teacher):
    wav = _wav()
    wav[100] = np.nan
    for fn in (
        lambda: teacher.features(torch.from_numpy(wav)),
        lambda: losspred_segment(teacher, torch.from_numpy(wav)),
        lambda: _tokenizer(teacher).encode(wav),
        lambda: mfcc(wav),
        lambda: trim_silence(wav),
    ):
        with pytest.raises(ValueError, match="NaN or infinite samples"):
            fn()


class _NanTeacher:
    def labels(self, wav):
        return torch.zeros(30, dtype=torch.long)

    def masked_losses(self, wav, mask, labels):
        out = torch.ones(mask.shape)
        out[0, 0] = float("nan")
        return out


def test_nan_teacher_losses_are_rejected():
    with pytest.raises(ValueError, match="masked-prediction losses contains 1 NaN"):
        losspred_segment(_NanTeacher(), None, num_segments=3)


# --- integer PCM, stereo ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int16, np.int32])
def test_integer_pcm_waveforms_are_rejected(teacher, dtype):
    pcm = (_wav() * 20000).astype(dtype)
    for fn in (
        lambda: teacher.features(torch.from_numpy(pcm)),
        lambda: losspred_segment(teacher, pcm),
        lambda: _tokenizer(teacher).encode(pcm),
        lambda: mfcc(pcm),
        lambda: trim_silence(pcm),
    ):
        with pytest.raises(TypeError, match="integer PCM"):
            fn()


@pytest.mark.parametrize("layout", ["channels_first", "channels_last"])
def test_stereo_waveforms_are_rejected(teacher, layout):
    w = _wav()
    stereo = np.stack([w, w]) if layout == "channels_first" else np.stack([w, w], axis=1)
    for fn in (
        lambda: losspred_segment(teacher, stereo),
        lambda: _tokenizer(teacher).encode(stereo),
        lambda: mfcc(stereo),
        lambda: trim_silence(stereo),
    ):
        with pytest.raises(ValueError, match="multi-channel"):
            fn()


def _write_pcm(path, wav: np.ndarray, dtype) -> None:
    if dtype == np.float32:
        wavfile.write(path, 16000, wav.astype(np.float32))
    elif dtype == np.uint8:
        wavfile.write(path, 16000, np.clip(np.round(wav * 128 + 128), 0, 255).astype(np.uint8))
    else:
        scale = float(np.iinfo(dtype).max + 1)
        wavfile.write(path, 16000, np.round(wav * scale).astype(dtype))


@pytest.mark.parametrize(("dtype", "atol"), [(np.int16, 1e-4), (np.int32, 1e-6), (np.uint8, 1e-2)])
def test_load_audio_scales_every_pcm_width(tmp_path, dtype, atol):
    wav = _wav(0.5)
    _write_pcm(tmp_path / "x.wav", wav, dtype)
    got = load_audio(tmp_path / "x.wav")
    assert got.dtype == np.float32 and got.shape == wav.shape
    np.testing.assert_allclose(got, wav, atol=atol)


def test_cli_tokenize_reads_int32_and_float_wavs_alike(tmp_path, teacher):
    """The CLI used its own reader, which divided int32 PCM by 32768 (65536x too loud); now it uses load_audio."""
    save_small_hubert(teacher, tmp_path / "student.pt")
    _tokenizer(teacher).save(tmp_path / "tokenizer.npz")
    wav = _wav(1.5, seed=3)
    _write_pcm(tmp_path / "f.wav", wav, np.float32)
    _write_pcm(tmp_path / "i.wav", wav, np.int32)
    out = tmp_path / "u.json"
    assert (
        main(
            ["tokenize", str(tmp_path / "f.wav"), str(tmp_path / "i.wav"), "--model", str(tmp_path), "--out", str(out)]
        )
        == 0
    )
    got = json.loads(out.read_text())
    assert got[str(tmp_path / "f.wav")] == got[str(tmp_path / "i.wav")] and got[str(tmp_path / "f.wav")]


# --- rate control parameters -------------------------------------------------------------------------------------------


def test_quantile_zero_is_honoured_and_out_of_range_is_rejected(teacher):
    assert _tokenizer(teacher).quantile == 0.75
    tok = SylBoostTokenizer(lambda w: w, np.zeros((2, 3)), delta=0.01, quantile=0.0)
    assert tok.quantile == 0.0
    assert SylBoostTokenizer(lambda w: w, np.zeros((2, 3)), rate="5.0hz", quantile=0.0).quantile == 0.0
    # quantile 0 (the cheapest segment) must reach the DP's rate control: compare with the direct selection
    torch.manual_seed(0)
    x = torch.randn(120, 4, dtype=torch.float64)
    costs = sse_costs(x)
    m = int(120 * 10 / 50)
    _, back = segmental_dp(costs, m, exact=False, backend="torch")
    for q in (0.0, 0.75):
        k = select_num_segments(costs[0], back[0], 120, 0.5, quantile=q)
        assert len(sylboost_segment(x, delta=0.5, quantile=q, backend="torch")) - 1 == k
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="quantile"):
            sylboost_segment(x, delta=0.5, quantile=bad)
        with pytest.raises(ValueError, match="quantile"):
            SylBoostTokenizer(lambda w: w, np.zeros((2, 3)), delta=0.01, quantile=bad)
    with pytest.raises(ValueError, match="delta"):
        sylboost_segment(x, delta=float("nan"))


# --- TextGrids ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def good_textgrid(tmp_path):
    path = tmp_path / "ok.TextGrid"
    write_textgrid(path, {"syllables": [(0.1, 0.3, "ba"), (0.3, 0.55, "ki")]}, xmax=0.8)
    return path


def test_textgrid_round_trip(good_textgrid):
    assert read_textgrid(good_textgrid)["syllables"] == [
        (0, 0.1, ""),
        (0.1, 0.3, "ba"),
        (0.3, 0.55, "ki"),
        (0.55, 0.8, ""),
    ]


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda t: t[: t.index("intervals [3]")], "ends early"),
        (lambda t: t.replace("xmin = 0.3", "xmin = abc", 1), "expected a number"),
        (lambda t: t.replace("xmax = 0.3", "xmax = 0.05", 1), "ends .* before it starts"),
        (lambda t: t.replace("xmin = 0.3", "xmin = 0.2", 1), "before the previous one ends"),
        (lambda t: t.replace("intervals: size = 4", "intervals: size = 2.5"), "non-negative integer"),
        (lambda t: t + "\n        intervals [5]:\n            xmin = 0.8\n", "unexpected values"),
        (lambda t: t.replace('"IntervalTier"', '"Tier"'), "unknown tier class"),
        (lambda t: t.replace('"ooTextFile"', '"binary"'), "not a TextGrid"),
    ],
    ids=["truncated", "non_numeric", "negative_interval", "overlap", "fractional_size", "trailing", "class", "header"],
)
def test_corrupted_textgrids_raise(good_textgrid, mutate, match):
    bad = good_textgrid.with_name("bad.TextGrid")
    bad.write_text(mutate(good_textgrid.read_text()))
    with pytest.raises(ValueError, match=match):
        read_textgrid(bad)


# --- fairseq LM checkpoints --------------------------------------------------------------------------------------------


def test_fairseq_checkpoint_without_cfg_needs_heads(tmp_path):
    cfg = SyllableLMConfig(vocab=13, depth=1, heads=2, dim=8, dropout=0.0, max_pos=20)
    torch.manual_seed(0)
    model = SyllableLM(cfg).eval()
    sd = lm_state_to_fairseq(model)
    torch.save({"model": sd}, tmp_path / "nocfg.pt")
    with pytest.raises(ValueError, match="no head count"):
        load_fairseq_lm(tmp_path / "nocfg.pt")
    x = torch.tensor([[13, 1, 2, 3]])
    loaded = load_fairseq_lm(tmp_path / "nocfg.pt", heads=2)
    assert loaded.config.heads == 2
    torch.testing.assert_close(loaded(x), model(x))
    assert load_fairseq_lm(tmp_path / "nocfg.pt", heads=4).config.heads == 4  # a different (explicit) choice
    with pytest.raises(ValueError, match="dividing the width"):
        load_fairseq_lm(tmp_path / "nocfg.pt", heads=3)
    # the legacy argparse layout records it too
    torch.save({"model": sd, "args": argparse.Namespace(num_heads=2)}, tmp_path / "args.pt")
    assert load_fairseq_lm(tmp_path / "args.pt").config.heads == 2
