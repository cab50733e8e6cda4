"""Silence trimming before LossPred (the paper trims each utterance to its speech span with rVAD).

``speech_span`` is a frame-energy detector in the spirit of rVAD's first pass, not rVAD itself: log energy of
25 ms frames every 10 ms; the threshold lies ``ratio`` of the way from the noise floor (the 10th percentile of the
frame energies) to the speech level (the 99th percentile), in dB; the span runs from the first to the last frame
above it. It is meant for leading and trailing silence; pauses inside the span are kept.
"""

from __future__ import annotations

import numpy as np

from ._checks import check_waveform
from .config import SAMPLE_RATE

__all__ = ["speech_span", "trim_silence"]


def _mono_float(wav, name: str = "wav") -> np.ndarray:
    return check_waveform(wav, name).cpu().double().numpy()


def speech_span(
    wav, sample_rate: int = SAMPLE_RATE, win_s: float = 0.025, hop_s: float = 0.010, ratio: float = 0.25
) -> tuple[int, int]:
    """``(start, end)`` sample indices of the speech in a mono float waveform (see the module docstring).

    Raises ``ValueError`` when the waveform is shorter than one frame or holds no frame above the threshold.
    """
    x = _mono_float(wav)
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"ratio must lie in (0, 1), got {ratio}")
    win, hop = int(round(win_s * sample_rate)), int(round(hop_s * sample_rate))
    if win < 1 or hop < 1:
        raise ValueError(f"win_s and hop_s must span at least one sample, got {win_s}, {hop_s}")
    if len(x) < win:
        raise ValueError(f"wav has {len(x)} samples, fewer than one {win}-sample frame")
    n = (len(x) - win) // hop + 1
    frames = np.lib.stride_tricks.sliding_window_view(x, win)[::hop][:n]
    energy = 10.0 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    floor, level = np.percentile(energy, 10), np.percentile(energy, 99)
    if level - floor < 1e-6:
        raise ValueError("no speech found: the frame energy is constant (silence or a steady signal)")
    speech = np.nonzero(energy > floor + ratio * (level - floor))[0]
    return int(speech[0] * hop), int(min(len(x), speech[-1] * hop + win))


def trim_silence(wav, sample_rate: int = SAMPLE_RATE, **kwargs) -> tuple[np.ndarray, int]:
    """The speech span of ``wav`` (float32) and its start sample (add ``start / sample_rate`` to times on it)."""
    start, end = speech_span(wav, sample_rate, **kwargs)
    return _mono_float(wav)[start:end].astype(np.float32), start
