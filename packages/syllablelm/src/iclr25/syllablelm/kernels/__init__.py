"""Kernel dispatch: ``backend="auto"`` runs Triton on CUDA tensors and the torch reference on CPU.

Triton modules (``*_kernel.py``; named so that importing them never shadows the dispatch functions below) are
imported lazily (only when the Triton path is chosen), so importing the package never imports
triton and ``TRITON_INTERPRET`` can be set by the test plugin first.
"""

from __future__ import annotations

import torch

from iclr25.shared import resolve_backend

from .reference import blocksums_reference, kmeans_assign_reference, segmental_dp_reference

__all__ = [
    "blocksums",
    "blocksums_reference",
    "kmeans_assign",
    "kmeans_assign_reference",
    "segmental_dp",
    "segmental_dp_reference",
]


def _check_tensor(name: str, x: object, ndim: int) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")


def blocksums(m: torch.Tensor, max_len: int, backend: str = "auto") -> torch.Tensor:
    """Diagonal-block sums of ``m [B, N, N]`` for all segments up to ``max_len`` frames: ``[B, N + 1, max_len + 1]``."""
    _check_tensor("m", m, 3)
    if m.shape[1] != m.shape[2]:
        raise ValueError(f"m must be square in its last two dimensions, got {tuple(m.shape)}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if resolve_backend(m, backend) == "triton":
        from .blocksums_kernel import blocksums_triton

        return blocksums_triton(m, max_len)
    return blocksums_reference(m, max_len)


def segmental_dp(
    costs: torch.Tensor, num_segments: int, exact: bool = True, backend: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Segmental DP (see ``segmental_dp_reference``); the Triton kernel runs one program per utterance."""
    _check_tensor("costs", costs, 3)
    if num_segments < 0:
        raise ValueError(f"num_segments must be >= 0, got {num_segments}")
    if resolve_backend(costs, backend) == "triton":
        from .segmental_dp_kernel import segmental_dp_triton

        return segmental_dp_triton(costs, num_segments, exact)
    return segmental_dp_reference(costs, num_segments, exact)


def kmeans_assign(x: torch.Tensor, centroids: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Nearest centroid (squared L2) of each row of ``x [N, D]`` among ``centroids [K, D]``; int64 ``[N]``."""
    _check_tensor("x", x, 2)
    _check_tensor("centroids", centroids, 2)
    if x.shape[1] != centroids.shape[1]:
        raise ValueError(f"x has {x.shape[1]} channels but centroids have {centroids.shape[1]}")
    if resolve_backend(x, backend) == "triton":
        from .kmeans_assign_kernel import kmeans_assign_triton

        return kmeans_assign_triton(x, centroids)
    return kmeans_assign_reference(x, centroids)
