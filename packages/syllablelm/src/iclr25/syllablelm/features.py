"""MFCC features aligned with HuBERT's 50 Hz frames (25 ms window = 400 samples, 20 ms hop = 320, no centring).

Used for the discrete targets of the small HuBERT-style encoder trained here (HuBERT's first-iteration recipe:
k-means on MFCCs).
"""

from __future__ import annotations

import numpy as np
from scipy.fft import dct

from ._checks import check_waveform


def mel_filterbank(n_mels: int, n_fft: int, sample_rate: int, fmin: float = 20.0, fmax: float | None = None):
    fmax = fmax or sample_rate / 2

    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    mels = np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2)
    bins = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    hz = mel_to_hz(mels)
    fb = np.zeros((n_mels, len(bins)))
    for i in range(n_mels):
        lo, c, hi = hz[i], hz[i + 1], hz[i + 2]
        fb[i] = np.clip(np.minimum((bins - lo) / (c - lo), (hi - bins) / (hi - c)), 0.0, None)
    return fb


def mfcc(
    wav,
    sample_rate: int = 16000,
    n_mfcc: int = 13,
    n_mels: int = 40,
    win: int = 400,
    hop: int = 320,
    deltas: bool = True,
    cmvn: bool = True,
) -> np.ndarray:
    """MFCCs (+ deltas) of a mono waveform: ``[T, n_mfcc * (2 if deltas else 1)]`` with ``T = (S - 400) // 320 + 1``."""
    x = check_waveform(wav).cpu().double().numpy()
    if len(x) < win:
        raise ValueError(f"need at least {win} samples, got {len(x)}")
    t = (len(x) - win) // hop + 1
    idx = np.arange(win)[None, :] + hop * np.arange(t)[:, None]
    frames = x[idx] * np.hanning(win)[None, :]
    n_fft = 512
    power = np.abs(np.fft.rfft(frames, n=n_fft)) ** 2
    logmel = np.log(power @ mel_filterbank(n_mels, n_fft, sample_rate).T + 1e-8)
    c = dct(logmel, type=2, axis=1, norm="ortho")[:, :n_mfcc]
    if deltas:
        padded = np.pad(c, ((1, 1), (0, 0)), mode="edge")
        c = np.concatenate([c, (padded[2:] - padded[:-2]) / 2.0], axis=1)
    if cmvn:
        c = (c - c.mean(0)) / (c.std(0) + 1e-8)
    return c.astype(np.float32)
