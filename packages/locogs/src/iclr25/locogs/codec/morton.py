"""Morton (Z-order) codes of 3D points: per-axis min-max normalisation to ``bits`` bits, bits interleaved."""

from __future__ import annotations

import numpy as np


def _spread3(v: np.ndarray) -> np.ndarray:
    """Insert two zero bits between each of the low 21 bits of v (uint64)."""
    v = v.astype(np.uint64) & np.uint64(0x1FFFFF)
    v = (v | (v << np.uint64(32))) & np.uint64(0x1F00000000FFFF)
    v = (v | (v << np.uint64(16))) & np.uint64(0x1F0000FF0000FF)
    v = (v | (v << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
    v = (v | (v << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
    v = (v | (v << np.uint64(2))) & np.uint64(0x1249249249249249)
    return v


def morton_codes(xyz: np.ndarray, bits: int = 21) -> np.ndarray:
    """uint64 Morton codes; x occupies the lowest bit of each triple."""
    if not 1 <= bits <= 21:
        raise ValueError(f"morton_codes: bits must be in 1..21, got {bits}")
    xyz = np.asarray(xyz, dtype=np.float64)
    lo, hi = xyz.min(axis=0), xyz.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    q = np.floor((xyz - lo) / span * ((1 << bits) - 1) + 0.5).astype(np.uint64)
    return _spread3(q[:, 0]) | (_spread3(q[:, 1]) << np.uint64(1)) | (_spread3(q[:, 2]) << np.uint64(2))


def morton_order(xyz: np.ndarray, bits: int = 21) -> np.ndarray:
    """Stable permutation sorting points along the Z-order curve."""
    return np.argsort(morton_codes(xyz, bits), kind="stable")
