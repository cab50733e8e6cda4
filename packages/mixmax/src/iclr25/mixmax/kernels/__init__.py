"""Kernel dispatch: backend="auto" runs Triton on CUDA tensors and the torch reference elsewhere.

Triton kernel modules are imported lazily (only when the Triton backend is chosen), so importing the package never
imports triton and ``TRITON_INTERPRET`` can be set before the first kernel import.
"""

from __future__ import annotations

import math

import torch

from iclr25.shared import resolve_backend

from .reference import kde_reference

__all__ = ["kde_log_density", "kde_reference"]


def _check(x, name: str) -> None:
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (float32 or float64), got {x.dtype}; convert it first")
    if not bool(torch.isfinite(x).all()):
        bad = torch.nonzero(~torch.isfinite(x))[0].tolist()
        raise ValueError(f"{name} contains NaN or infinite values (first at row {bad[0]}, column {bad[1]})")


def kde_log_density(
    queries: torch.Tensor,
    train: torch.Tensor,
    bandwidth: float,
    backend: str = "auto",
    log_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Gaussian-KDE log-density of ``train`` (bandwidth h) at each row of ``queries`` [M, d] -> [M].

    backend: "auto" | "torch" | "triton". The Triton kernel fuses distances (``tl.dot``) with a streaming
    log-sum-exp over tiles of training points, so the [M, n] distance matrix never exists in memory; the torch
    reference streams over tiles too. Both inputs are first centred on the training mean (computed in float64; the
    density is translation invariant), so the fp32 paths stay accurate far from the origin.
    ``log_weights`` [n]: normalised log row weights (logsumexp = 0) for a weighted KDE (torch backend only).
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
    if not (math.isfinite(bandwidth) and bandwidth > 0):
        raise ValueError(f"bandwidth must be a positive finite float, got {bandwidth}")
    _check(queries, "queries")
    _check(train, "train")
    if queries.device != train.device:
        raise ValueError(f"queries and train must be on the same device, got {queries.device} and {train.device}")
    if log_weights is not None:
        if log_weights.shape != (train.shape[0],):
            raise ValueError(f"log_weights must have one entry per training row ({train.shape[0]})")
        if backend == "triton":
            raise ValueError("the Triton KDE has no row weights; use backend='torch' for a weighted KDE")
        backend = "torch"
    centre = train.detach().to(torch.float64).mean(dim=0)
    q = (queries.to(torch.float64) - centre).to(queries.dtype)
    t = (train.to(torch.float64) - centre).to(train.dtype)
    if resolve_backend(queries, backend) == "triton":
        from .kde import kde_triton

        return kde_triton(q, t, float(bandwidth))
    lw = None if log_weights is None else log_weights.to(device=t.device, dtype=t.dtype)
    return kde_reference(q, t, float(bandwidth), lw)
