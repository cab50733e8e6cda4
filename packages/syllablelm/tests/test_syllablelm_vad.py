"""Silence trimming before LossPred: planted speech spans are found, and utterance times move with the cut."""

from __future__ import annotations

import numpy as np
import pytest

from iclr25.syllablelm.data.synth import Utterance
from iclr25.syllablelm.pipeline import trim_utterance
from iclr25.syllablelm.vad import speech_span, trim_silence

SR = 16000


def _planted(lead: float, speech: float, tail: float, noise: float = 1e-3, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n0, n1, n2 = int(lead * SR), int(speech * SR), int(tail * SR)
    t = np.arange(n1) / SR
    voiced = 0.4 * np.sin(2 * np.pi * 180 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    x = np.concatenate([np.zeros(n0), voiced, np.zeros(n2)]) + noise * rng.standard_normal(n0 + n1 + n2)
    return x.astype(np.float32)


def _assert_span(start: int, end: int, t0: float, t1: float) -> None:
    """The detector errs towards keeping speech: it never cuts more than 5 ms of it, and keeps at most one 25 ms
    analysis window of silence on either side."""
    s, e = start / SR, end / SR
    assert t0 - 0.025 <= s <= t0 + 0.005 and t1 - 0.005 <= e <= t1 + 0.025, (s, e, t0, t1)


@pytest.mark.parametrize(("lead", "tail"), [(0.3, 0.5), (0.0, 0.4), (0.6, 0.0), (0.05, 0.05)])
def test_speech_span_finds_planted_speech(lead, tail):
    wav = _planted(lead, 1.2, tail)
    start, end = speech_span(wav)
    _assert_span(start, end, lead, lead + 1.2)
    cut, off = trim_silence(wav)
    assert off == start and len(cut) == end - start and cut.dtype == np.float32


def test_inner_pauses_are_kept():
    a, b = _planted(0.2, 0.5, 0.3, seed=1), _planted(0.0, 0.5, 0.2, seed=2)
    start, end = speech_span(np.concatenate([a, b]))
    _assert_span(start, end, 0.2, 1.5)


def test_no_speech_raises():
    with pytest.raises(ValueError, match="no speech"):
        speech_span(np.zeros(SR, np.float32))
    with pytest.raises(ValueError, match="fewer than one"):
        speech_span(np.zeros(100, np.float32))


def test_trim_utterance_shifts_every_time():
    wav = _planted(0.25, 0.8, 0.3)
    utt = Utterance(
        wav=wav,
        sample_rate=SR,
        syllables=[(0.25, 0.6, "ba"), (0.6, 1.05, "ki")],
        phones=[(0.25, "b"), (0.3, "a:"), (0.6, "k"), (0.66, "i:")],
    )
    cut = trim_utterance(utt)
    start, end = speech_span(wav)
    off = start / SR
    assert len(cut.wav) == end - start
    assert cut.syllables == [(s - off, e - off, lab) for s, e, lab in utt.syllables]
    assert cut.phones == [(t - off, p) for t, p in utt.phones]
    assert -0.005 <= cut.syllables[0][0] <= 0.025  # the first onset now sits at the start of the trimmed audio
