"""Input checks shared by the public entry points: a bad input fails loudly with what was wrong and what was expected.

Waveforms are mono float samples in [-1, 1] at 16 kHz. Integer PCM (int16/int32 from a WAV reader) is rejected
rather than rescaled, because its scale cannot be told from the array alone; ``load_audio`` reads files correctly.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["check_finite", "check_quantile", "check_waveform"]


def check_waveform(wav, name: str = "wav", batched: bool = False) -> torch.Tensor:
    """``wav`` as a float tensor after checking it: floating dtype, 1-D (``[B, S]`` too when ``batched``), finite.

    A 2-D input to a one-utterance API is reported as multi-channel audio (downmix it), an integer dtype as PCM that
    must be scaled (or read with ``load_audio``).
    """
    if isinstance(wav, torch.Tensor):
        t = wav.detach()
    else:
        arr = np.asarray(wav)
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise TypeError(f"{name} must be a float array of samples, got {type(wav).__name__} of dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if not t.is_floating_point():
        raise TypeError(
            f"{name} must be float samples in [-1, 1], got dtype {t.dtype}: integer PCM has to be scaled first "
            "(int16: x / 32768, int32: x / 2**31), or read the file with iclr25.syllablelm.load_audio"
        )
    if batched:
        if t.ndim not in (1, 2):
            raise ValueError(f"{name} must be [S] or [B, S] mono samples, got shape {tuple(t.shape)}")
    elif t.ndim != 1:
        hint = " (multi-channel audio: downmix to mono first, e.g. wav.mean(channel_axis))" if t.ndim == 2 else ""
        raise ValueError(f"{name} must be 1-D mono samples [S], got shape {tuple(t.shape)}{hint}")
    if not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise ValueError(f"{name} contains {bad} NaN or infinite samples; expected finite samples in [-1, 1]")
    return t


def check_finite(x: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` when ``x`` holds NaN or infinite entries."""
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name} contains {bad} NaN or infinite entries of {x.numel()}; expected finite values")


def check_quantile(quantile, name: str = "quantile") -> float:
    """A float in [0, 1] (0.0 is a valid quantile: the minimum)."""
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number in [0, 1], got {quantile!r}")
    q = float(quantile)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {quantile!r}")
    return q


def check_delta(delta, name: str = "delta") -> float:
    """A finite, non-negative rate-control threshold."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a finite number >= 0, got {delta!r}")
    d = float(delta)
    if not math.isfinite(d) or d < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {delta!r}")
    return d
