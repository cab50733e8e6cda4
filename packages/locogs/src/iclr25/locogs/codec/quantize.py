"""Post-training quantisers of LocoGS: clipped uniform quantisation, optionally after a log transform."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import clip_width


@dataclass
class QuantParams:
    bits: int
    lo: float
    hi: float
    log: bool

    def to_dict(self) -> dict:
        return {"bits": self.bits, "lo": self.lo, "hi": self.hi, "log": self.log}


def log_transform(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


def inverse_log_transform(y: np.ndarray) -> np.ndarray:
    return np.sign(y) * np.expm1(np.abs(y))


def quantize_uniform(x: np.ndarray, bits: int, log: bool = False, clip: bool = True) -> tuple[np.ndarray, QuantParams]:
    """Clip to mean +- d sigma (d = 3 + 3 (bits - 1) / 15, never wider than the data), optionally log-transform
    (sign(x) log1p|x|, applied after clipping), then round to 2^bits - 1 uniform steps. Returns uint8/uint16 codes."""
    if not 1 <= bits <= 16:
        raise ValueError(f"quantize_uniform: bits must be in 1..16, got {bits}")
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return np.zeros(x.shape, np.uint8 if bits <= 8 else np.uint16), QuantParams(bits, 0.0, 0.0, log)
    if clip:
        d = clip_width(bits)
        mu, sd = x.mean(), x.std()
        x = np.clip(x, max(mu - d * sd, x.min()), min(mu + d * sd, x.max()))
    if log:
        x = log_transform(x)
    lo, hi = float(x.min()), float(x.max())
    levels = (1 << bits) - 1
    scale = (hi - lo) / levels if hi > lo else 1.0
    q = np.rint((x - lo) / scale).clip(0, levels)
    return q.astype(np.uint8 if bits <= 8 else np.uint16), QuantParams(bits, lo, hi, log)


def dequantize(q: np.ndarray, p: QuantParams | dict) -> np.ndarray:
    if isinstance(p, dict):
        p = QuantParams(**p)
    levels = (1 << p.bits) - 1
    scale = (p.hi - p.lo) / levels if p.hi > p.lo else 1.0
    x = q.astype(np.float64) * scale + p.lo
    return inverse_log_transform(x) if p.log else x
