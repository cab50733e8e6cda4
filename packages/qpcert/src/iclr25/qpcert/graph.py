"""Graph operators S used by the NTKs (dense float64 torch tensors; scipy/torch sparse input accepted).

- ``row_normalize``: D^-1 (A + I)  (GCN/SGC, official ``row`` normalisation)
- ``sym_normalize``: D^-1/2 (A + I) D^-1/2
- ``sage_operator``: D^-1 A + I (mean aggregation plus the root weight)
- ``gin_operator``: A + I (sum aggregation, eps = 0)
- ``appnp_operator``: 10-step power iteration S <- (1-a) Â S + a I on the symmetric normalisation Â; exact PPNP
  a (I - (1-a) Â)^-1 with ``exact=True``.

The adjacency is symmetrised from its upper triangle and its diagonal is replaced by the self loop, as in the
official code (``triu`` + transpose, diagonal := 1).
"""

from __future__ import annotations

import numpy as np
import torch


def to_dense_adjacency(adj, dtype: torch.dtype = torch.float64, require_symmetric: bool = True) -> torch.Tensor:
    """Validate and densify an adjacency (numpy, scipy.sparse, torch dense or sparse) into a float tensor."""
    if hasattr(adj, "toarray") and not isinstance(adj, torch.Tensor):  # scipy.sparse
        adj = adj.toarray()
    if isinstance(adj, torch.Tensor):
        a = adj.to_dense() if adj.is_sparse else adj
        a = a.detach().to(dtype)
    else:
        a = torch.as_tensor(np.asarray(adj), dtype=dtype)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"adjacency must be a square [n, n] matrix, got shape {tuple(a.shape)}")
    if not torch.isfinite(a).all():
        raise ValueError("adjacency contains NaN or inf entries")
    if require_symmetric and not torch.allclose(a, a.T):
        raise ValueError("adjacency must be symmetric (an undirected graph); got an asymmetric matrix")
    return a


def _with_self_loops(adj: torch.Tensor) -> torch.Tensor:
    a = torch.triu(adj, diagonal=1)
    a = a + a.T
    a.fill_diagonal_(1.0)
    return a


def _without_self_loops(adj: torch.Tensor) -> torch.Tensor:
    a = torch.triu(adj, diagonal=1)
    return a + a.T


def row_normalize(adj) -> torch.Tensor:
    """D^-1 (A + I)."""
    a = _with_self_loops(to_dense_adjacency(adj))
    return a / a.sum(dim=1, keepdim=True)


def sym_normalize(adj) -> torch.Tensor:
    """D^-1/2 (A + I) D^-1/2."""
    a = _with_self_loops(to_dense_adjacency(adj))
    d = a.sum(dim=1).rsqrt()
    return d[:, None] * a * d[None, :]


def sage_operator(adj) -> torch.Tensor:
    """D^-1 A + I (isolated nodes aggregate nothing)."""
    a = _without_self_loops(to_dense_adjacency(adj))
    deg = a.sum(dim=1, keepdim=True)
    s = torch.where(deg > 0, a / deg.clamp_min(1e-300), torch.zeros_like(a))
    return s + torch.eye(a.shape[0], dtype=a.dtype)


def gin_operator(adj) -> torch.Tensor:
    """A + I."""
    return _with_self_loops(to_dense_adjacency(adj))


def appnp_operator(adj, alpha: float = 0.1, iterations: int = 10, exact: bool = False) -> torch.Tensor:
    """APPNP propagation matrix after ``iterations`` power steps, or the exact PPNP matrix."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must lie in (0, 1], got {alpha}")
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise ValueError(f"iterations must be an integer >= 0, got {iterations!r}")
    a_hat = sym_normalize(adj)
    eye = torch.eye(a_hat.shape[0], dtype=a_hat.dtype)
    if exact:
        return alpha * torch.linalg.inv(eye - (1.0 - alpha) * a_hat)
    s = eye.clone()
    for _ in range(int(iterations)):
        s = (1.0 - alpha) * (a_hat @ s) + alpha * eye
    return s
