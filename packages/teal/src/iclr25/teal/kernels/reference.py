"""Pure-torch references of the TEAL decode kernels: threshold the input, then a dense product (reads all of W).

They define what the kernels compute; they are not fast. ``weight`` is ``[out, in]`` as in ``nn.Linear``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def active_mask(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """1[|x| > t], compared in at least fp32 (a bf16/fp16 comparison would round t itself to bf16/fp16)."""
    ax = x.abs()
    if ax.dtype in (torch.float16, torch.bfloat16):
        ax = ax.float()
    return ax > threshold


def sparsify_input(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """TEAL's s_t(x) = x * 1[|x| > t]."""
    return x * active_mask(x, threshold)


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
