"""Pure-torch references of the TEAL decode kernels: threshold the input, then a dense product (reads all of W).

They define what the kernels compute; they are not fast. ``weight`` is ``[out, in]`` as in ``nn.Linear``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# (significand bits, smallest subnormal exponent, largest finite value) of the formats a threshold is compared in
_GRID = {
    torch.float32: (24, -149, 3.4028234663852886e38),
    torch.bfloat16: (8, -133, 3.3895313892515355e38),
    torch.float16: (11, -24, 65504.0),
}


def _round_to_grid(t: float, bits: int, min_exp: int, down: bool) -> float:
    """``t`` (finite, > 0) rounded to a binary format with ``bits`` significand bits (nearest-even or down)."""
    _, e = math.frexp(t)  # t = m * 2**e, 0.5 <= m < 1
    ulp = math.ldexp(1.0, max(e - bits, min_exp))
    q = t / ulp  # exact: a power-of-two scaling
    return (math.floor(q) if down else round(q)) * ulp


def compare_threshold(threshold: float, dtype: torch.dtype) -> float:
    """The threshold to compare ``|x|`` against in ``x``'s own dtype so that the result equals the fp32 comparison
    ``|x| <= fp32(t)`` the kernels make: fp32(t) itself for fp32 (and t for fp64), else the largest bf16/fp16 value
    not above fp32(t). (Comparing bf16/fp16 ``|x|`` with t rounded to nearest would zero values just above t.)"""
    t = float(threshold)
    if dtype == torch.float64 or not (0.0 < t < math.inf):
        return t
    bits, min_exp, top = _GRID[torch.float32]
    t32 = _round_to_grid(t, bits, min_exp, down=False)
    if t32 > top:
        return math.inf
    if dtype not in _GRID or dtype == torch.float32:
        return t32
    bits, min_exp, top = _GRID[dtype]
    return min(_round_to_grid(t32, bits, min_exp, down=True), top)


def active_mask(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """1[not |x| <= t]: |x| > t, and NaN counts as active so it propagates to the output as in x * 1[|x| > t] (where
    NaN * 0 = NaN). Exactly the fp32 comparison of the kernels, computed in ``x``'s dtype (:func:`compare_threshold`)."""
    return ~(x.abs() <= compare_threshold(threshold, x.dtype))


def sparsify_input(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """TEAL's s_t(x) = x * 1[|x| > t]: inactive entries become exactly 0, NaN stays NaN (one fused ``hardshrink``)."""
    return F.hardshrink(x, compare_threshold(threshold, x.dtype))


def sparse_gemv_reference(
    x: torch.Tensor, weight: torch.Tensor, threshold: float, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """y = W s_t(x) + b for one token ``x`` of shape ``[in]``."""
    return F.linear(sparsify_input(x, threshold), weight, bias)


def sparse_qkv_gemv_reference(
    x: torch.Tensor, weight_qkv: torch.Tensor, thresholds: tuple[float, float, float], sizes: tuple[int, int, int]
) -> torch.Tensor:
    """Fused q/k/v: ``weight_qkv`` stacks W_q, W_k, W_v along the output dim (``sizes`` rows each); each output block
    reads the input sparsified with its own threshold. Returns the concatenated ``[q | k | v]``."""
    parts = torch.split(weight_qkv, list(sizes), dim=0)
    return torch.cat([F.linear(sparsify_input(x, t), w) for w, t in zip(parts, thresholds)], dim=-1)


def sparse_gemv_int8_reference(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, threshold: float
) -> torch.Tensor:
    """int8 weights with per-output-channel scales: dequantize (W = scales[:, None] * q), then the fp32 reference."""
    w = qweight.to(torch.float32) * scales.to(torch.float32)[:, None]
    return F.linear(sparsify_input(x.to(torch.float32), threshold), w)


def splitk_sparse_gemv_reference(
    x: torch.Tensor, weight: torch.Tensor, threshold: float, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Reference of the Triton module ``kernels/splitk_sparse_gemv.py`` (single threshold): ``sparse_gemv_reference``.

    Its fused q/k/v and int8 entry points are checked against ``sparse_qkv_gemv_reference`` and
    ``sparse_gemv_int8_reference``.
    """
    return sparse_gemv_reference(x, weight, threshold, bias)
