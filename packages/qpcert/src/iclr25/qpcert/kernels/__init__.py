"""Kernel dispatch: ``backend="auto"`` runs the Triton kernel on CUDA tensors and the torch reference on CPU.

Triton modules are imported lazily, only when the Triton path is chosen.
"""

from __future__ import annotations

import torch

from iclr25.shared import resolve_backend

from .reference import box_qp_reference, kkt_residual

__all__ = ["box_qp", "box_qp_reference", "kkt_residual"]


def box_qp(q: torch.Tensor, y: torch.Tensor, alpha0: torch.Tensor, c: float, sweeps: int, backend: str = "auto"):
    """Batched coordinate descent for the bias-free SVM dual (see :mod:`.reference`); returns (alpha, kkt)."""
    if q.ndim != 2 or q.shape[0] != q.shape[1]:
        raise ValueError(f"q must be a square [m, m] matrix, got {tuple(q.shape)}")
    if y.ndim != 2 or y.shape[1] != q.shape[0] or alpha0.shape != y.shape:
        raise ValueError(
            f"y and alpha0 must be [B, m] with m = {q.shape[0]}, got {tuple(y.shape)}, {tuple(alpha0.shape)}"
        )
    if resolve_backend(q, backend) == "triton":
        from .box_qp_kernel import box_qp_triton

        dtype = q.dtype
        return box_qp_triton(q.contiguous(), y.to(dtype).contiguous(), alpha0.to(dtype).contiguous(), c, sweeps)
    return box_qp_reference(q, y.to(q.dtype), alpha0.to(q.dtype), c, sweeps)
