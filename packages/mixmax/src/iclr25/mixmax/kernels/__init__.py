"""Kernel dispatch: backend="auto" runs Triton on CUDA tensors and the torch reference elsewhere.

Triton kernel modules are imported lazily (only when the Triton backend is chosen), so importing the package never
imports triton and ``TRITON_INTERPRET`` can be set before the first kernel import.
"""

from __future__ import annotations

import torch

from iclr25.shared import resolve_backend

from .reference import kde_reference

__all__ = ["kde_log_density", "kde_reference"]


def kde_log_density(
    queries: torch.Tensor, train: torch.Tensor, bandwidth: float, backend: str = "auto"
) -> torch.Tensor:
    """Gaussian-KDE log-density of ``train`` (bandwidth h) at each row of ``queries`` [M, d] -> [M].

    backend: "auto" | "torch" | "triton". The Triton kernel fuses distances (``tl.dot``) with a streaming
    log-sum-exp over tiles of training points, so the [M, n] distance matrix never exists in memory.
    """
    if not (isinstance(queries, torch.Tensor) and isinstance(train, torch.Tensor)):
        raise TypeError("queries and train must be torch tensors")
    if queries.ndim != 2 or train.ndim != 2 or queries.shape[1] != train.shape[1]:
        raise ValueError(
            f"queries [M, d] and train [n, d] must be 2-D with equal d, got {tuple(queries.shape)}, "
            f"{tuple(train.shape)}"
        )
    if train.shape[0] == 0:
        raise ValueError("train must have at least one row")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
    if resolve_backend(queries, backend) == "triton":
        from .kde import kde_triton

        return kde_triton(queries, train, float(bandwidth))
    return kde_reference(queries, train, float(bandwidth))
