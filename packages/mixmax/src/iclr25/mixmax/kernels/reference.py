"""Pure-torch references for the Triton kernels (never imports triton)."""

from __future__ import annotations

import math

import torch

__all__ = ["kde_reference"]


def kde_reference(queries: torch.Tensor, train: torch.Tensor, bandwidth: float, chunk_size: int = 1024) -> torch.Tensor:
    """Gaussian kernel density log p(x) at each query, normalised exactly like sklearn's KernelDensity:

        log p(x) = logsumexp_j( -||x - x_j||^2 / (2 h^2) ) - log n - (d/2) log(2 pi h^2).

    Squared distances are ||x||^2 + ||x_j||^2 - 2 <x, x_j> (clamped at 0), computed over chunks of queries so memory
    stays O(chunk_size * n). Differentiable with respect to both inputs.
    """
    n, d = train.shape
    h2 = float(bandwidth) ** 2
    tn = train.square().sum(dim=1)
    out = []
    for q in queries.split(chunk_size):
        d2 = (q.square().sum(dim=1, keepdim=True) + tn[None, :] - 2.0 * q @ train.T).clamp_min(0.0)
        out.append(torch.logsumexp(-d2 / (2.0 * h2), dim=1))
    lse = torch.cat(out) if out else queries.new_zeros(0)
    return lse - math.log(n) - 0.5 * d * math.log(2.0 * math.pi * h2)
