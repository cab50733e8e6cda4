"""Numerical comparison helpers (relative RMS with an absolute floor, NaN rejected)."""

from __future__ import annotations

from typing import Any

import numpy as np

# (ratio, atol) by dtype name and device type. The interpreter computes fp32/fp16 exactly like torch on CPU;
# CUDA fp32 allows for TF32 tl.dot. bf16 only runs on GPU.
TOLERANCES: dict[tuple[str, str], tuple[float, float]] = {
    ("float64", "cpu"): (1e-10, 1e-12),
    ("float32", "cpu"): (1e-5, 1e-6),
    ("float16", "cpu"): (5e-3, 1e-3),
    ("bfloat16", "cpu"): (2e-2, 1e-2),
    ("float64", "cuda"): (1e-10, 1e-12),
    ("float32", "cuda"): (5e-3, 1e-5),
    ("float16", "cuda"): (5e-3, 1e-3),
    ("bfloat16", "cuda"): (2e-2, 1e-2),
}


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def tolerance(dtype: Any, device: Any = "cpu") -> tuple[float, float]:
    """(ratio, atol) for a dtype (torch or numpy) on a device ("cpu"/"cuda" or a torch device)."""
    dev = getattr(device, "type", str(device)).split(":")[0]
    key = (_dtype_name(dtype), "cuda" if dev == "cuda" else "cpu")
    if key not in TOLERANCES:
        raise ValueError(f"no tolerance for dtype {key[0]!r} on {key[1]!r}; known: {sorted(TOLERANCES)}")
    return TOLERANCES[key]


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach()
        if hasattr(x, "float") and str(x.dtype) in {"torch.bfloat16", "torch.float16"}:
            x = x.float()
        x = x.cpu().numpy()
    return np.asarray(x, dtype=np.float64) if np.asarray(x).dtype.kind in "fiub" else np.asarray(x)


def assert_close_ratio(ref: Any, out: Any, ratio: float = 1e-5, atol: float = 1e-6, name: str = "output") -> float:
    """Assert ``out`` matches ``ref``: equal shapes, no NaN/inf where ``ref`` is finite, NaN exactly where ``ref`` is
    NaN, and either max |out - ref| <= atol or RMS(out - ref) / RMS(ref) <= ratio. Returns the relative RMS error.
    """
    r, o = _to_numpy(ref), _to_numpy(out)
    if r.shape != o.shape:
        raise AssertionError(f"{name}: shape {o.shape} differs from the reference shape {r.shape}")
    r_nan, o_nan = np.isnan(r), np.isnan(o)
    if (o_nan & ~r_nan).any():
        raise AssertionError(f"{name}: {int((o_nan & ~r_nan).sum())} NaN values where the reference is not NaN")
    if (r_nan & ~o_nan).any():
        raise AssertionError(f"{name}: {int((r_nan & ~o_nan).sum())} values are not NaN where the reference is NaN")
    finite = ~r_nan
    r_inf = np.isinf(r) & finite
    if (np.isinf(o) & finite & ~r_inf).any() or (r_inf & (o != r)).any():
        raise AssertionError(f"{name}: infinities differ from the reference")
    mask = finite & ~r_inf
    if not mask.any():
        return 0.0
    diff = o[mask] - r[mask]
    max_abs = float(np.max(np.abs(diff)))
    rms_ref = float(np.sqrt(np.mean(r[mask] ** 2)))
    rel = float(np.sqrt(np.mean(diff**2)) / rms_ref) if rms_ref > 0 else (0.0 if max_abs == 0 else float("inf"))
    if max_abs <= atol:
        return rel
    if rel > ratio:
        raise AssertionError(
            f"{name}: relative RMS error {rel:.3e} > {ratio:.1e} (max abs error {max_abs:.3e} > atol {atol:.1e})"
        )
    return rel
