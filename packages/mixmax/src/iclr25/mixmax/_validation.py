"""Input checks shared by the estimators (clear ValueErrors naming what was wrong and what was expected)."""

from __future__ import annotations

import numpy as np

__all__ = ["as_2d_float", "check_lengths", "encode_groups", "check_no_missing", "check_sample_weight"]


def as_2d_float(X, name: str = "X") -> np.ndarray:
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array-like [n_samples, n_features]") from exc
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D [n_samples, n_features], got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name} contains NaN or infinite values (first at row {bad[0]}, column {bad[1]})")
    return arr


def check_lengths(**arrays) -> int:
    lengths = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"mismatched lengths: {lengths}")
    return next(iter(lengths.values()))


def _missing_mask(a: np.ndarray) -> np.ndarray:
    """True where an entry is None or a float NaN (any dtype)."""
    if a.dtype.kind == "f":
        return np.isnan(a)
    if a.dtype.kind == "c":
        return np.isnan(a.real) | np.isnan(a.imag)
    if a.dtype.kind == "O":
        return np.array([v is None or (isinstance(v, float) and v != v) for v in a.ravel()], dtype=bool).reshape(
            a.shape
        )
    return np.zeros(a.shape, dtype=bool)


def check_no_missing(a, name: str) -> np.ndarray:
    """Reject None / NaN entries (a NaN label would otherwise become its own class or group)."""
    a = np.asarray(a)
    bad = _missing_mask(a)
    if np.any(bad):
        rows = np.flatnonzero(bad.reshape(len(a), -1).any(axis=1))
        raise ValueError(
            f"{name} contains {len(rows)} missing values (None or NaN), first at row {int(rows[0])}; "
            f"every row needs a {name[:-1] if name.endswith('s') else name} label"
        )
    return a


def encode_groups(groups, known: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Map group labels to codes 0..G-1. With ``known``, unknown labels raise; otherwise every label is a group."""
    g = check_no_missing(groups, "groups")
    if g.ndim != 1:
        raise ValueError(f"groups must be 1-D (one group label per row), got shape {g.shape}")
    if g.dtype.kind == "O":
        types = {type(v) for v in g}
        if len(types) > 1:
            raise TypeError(f"group labels must all have one type, got {sorted(t.__name__ for t in types)}")
    if known is None:
        known = np.unique(g)
    if len(g) == 0:
        return np.zeros(0, dtype=np.int64), known
    codes = np.searchsorted(known, g)
    codes = np.minimum(codes, len(known) - 1)
    bad = known[codes] != g
    if np.any(bad):
        raise ValueError(f"unknown group labels {np.unique(g[bad]).tolist()[:10]}; known groups: {known.tolist()}")
    return codes.astype(np.int64), known


def check_sample_weight(sample_weight, n: int) -> np.ndarray:
    """Nonnegative finite per-row weights [n] with a positive sum (``None`` -> ones)."""
    if sample_weight is None:
        return np.ones(n, dtype=np.float64)
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError("sample_weight must be a numeric array-like with one weight per row") from exc
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},) (one weight per row), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and nonnegative")
    if not w.sum() > 0:
        raise ValueError("sample_weight must not be all zero (it needs a positive sum)")
    return w
