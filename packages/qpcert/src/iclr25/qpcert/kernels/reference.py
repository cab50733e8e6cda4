"""Pure-torch references of the Triton kernels (never imports triton).

``box_qp_reference`` is the batched dual coordinate descent of the bias-free soft-margin kernel SVM:

    min_a  1/2 a^T (y y^T o Q) a - 1^T a    s.t.  0 <= a <= C          (one problem per row y of Y)

Cyclic exact coordinate minimisation: with w = Q (y o a), the partial gradient is g_i = y_i w_i - 1 and
a_i <- clip(a_i - g_i / Q_ii, 0, C); w is updated by (delta a_i) y_i Q[:, i]. The label signs are applied on the fly;
y y^T o Q is never formed. After ``sweeps`` passes it returns the iterate and its KKT (natural) residual
max_i |a_i - clip(a_i - g_i, 0, C)|, which is 0 exactly at an optimum.
"""

from __future__ import annotations

import torch


def big_step(dtype: torch.dtype) -> float:
    """Stand-in for 1/Q_ii when Q_ii = 0 (the coordinate then jumps to a bound): large but finite in ``dtype``."""
    return 1e150 if dtype == torch.float64 else 1e18


def kkt_residual(q: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor, c: float) -> torch.Tensor:
    """Natural KKT residual per problem: max_i |a_i - clip(a_i - g_i, 0, C)| with g = y o (Q (y o a)) - 1."""
    g = y * ((y * alpha) @ q) - 1.0
    return (alpha - (alpha - g).clamp(0.0, c)).abs().amax(dim=-1)


def box_qp_reference(q: torch.Tensor, y: torch.Tensor, alpha0: torch.Tensor, c: float, sweeps: int):
    """``sweeps`` cyclic coordinate-descent passes from ``alpha0`` for every labeling in ``y`` [B, m].

    Returns ``(alpha [B, m], kkt_residual [B])``.
    """
    # problem-major -> coordinate-major layout, so that every coordinate update touches contiguous memory
    alpha = alpha0.T.contiguous()
    yt = y.T.contiguous()
    w = q @ (yt * alpha)
    diag = torch.diagonal(q)
    inv_diag = torch.where(diag > 0, 1.0 / torch.where(diag > 0, diag, 1.0), torch.full_like(diag, big_step(q.dtype)))
    for _ in range(int(sweeps)):
        for i in range(q.shape[0]):
            g = yt[i] * w[i] - 1.0
            new = (alpha[i] - g * inv_diag[i]).clamp(0.0, c)
            dz = (new - alpha[i]) * yt[i]
            alpha[i] = new
            w.addr_(q[i], dz)
    alpha, w = alpha.T, w.T
    g = y * w - 1.0
    kkt = (alpha - (alpha - g).clamp(0.0, c)).abs().amax(dim=-1)
    return alpha, kkt
