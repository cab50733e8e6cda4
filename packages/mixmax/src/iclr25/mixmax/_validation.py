"""Input checks shared by the estimators (clear ValueErrors naming what was wrong)."""

from __future__ import annotations

import numpy as np


def as_2d_float(X, name: str = "X") -> np.ndarray:
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array-like [n_samples, n_features]") from exc
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D [n_samples, n_features], got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def check_lengths(**arrays) -> int:
    lengths = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"mismatched lengths: {lengths}")
    return next(iter(lengths.values()))


def encode_groups(groups, known: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Map group labels to codes 0..G-1. With ``known``, unknown labels raise; otherwise every label is a group."""
    g = np.asarray(groups)
    if g.ndim != 1:
        raise ValueError(f"groups must be 1-D (one group label per row), got shape {g.shape}")
    if known is None:
        known = np.unique(g)
    codes = np.searchsorted(known, g)
    codes = np.clip(codes, 0, len(known) - 1)
    bad = known[codes] != g
    if np.any(bad):
        raise ValueError(f"unknown group labels {np.unique(g[bad]).tolist()[:10]}; known groups: {known.tolist()}")
    return codes.astype(np.int64), known
