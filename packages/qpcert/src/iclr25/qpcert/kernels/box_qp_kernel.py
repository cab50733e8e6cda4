"""Triton kernel: batched box-QP coordinate descent of the bias-free kernel SVM dual, one program per labeling.

Reference: :func:`iclr25.qpcert.kernels.reference.box_qp_reference` (same update order, same arithmetic).

Each program keeps the whole m x m kernel Q (m <= 64, padded to a power of two) in registers, with its diagonal,
the labeling's signs y, the dual variables a and w = Q (y o a); label signs are applied on the fly (the matrix
y y^T o Q is never formed). Coordinate i is read out of the register tile with a masked reduction. After the fixed
number of sweeps it writes a and the KKT residual. Not differentiable (it solves a QP whose outputs feed discrete
certificates); the polish step and the exactness check live in :mod:`iclr25.qpcert.svm`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .reference import big_step

MAX_M = 64


@triton.jit
def _box_qp_kernel(
    q_ptr, y_ptr, a0_ptr, a_ptr, kkt_ptr, m, c, sweeps, inv_tiny,
    stride_qr, stride_qc, stride_yb, stride_ym, stride_ab, stride_am, stride_ob, stride_om,
    BLOCK_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK_M)
    valid = offs < m
    rows = offs[:, None]
    cols = offs[None, :]
    qmask = (rows < m) & (cols < m)
    qt = tl.load(q_ptr + rows * stride_qr + cols * stride_qc, mask=qmask, other=0.0)
    diag = tl.sum(tl.where(rows == cols, qt, 0.0), axis=1)
    inv_diag = tl.where(diag > 0, 1.0 / tl.where(diag > 0, diag, 1.0), inv_tiny)
    y = tl.load(y_ptr + pid * stride_yb + offs * stride_ym, mask=valid, other=0.0)
    alpha = tl.load(a0_ptr + pid * stride_ab + offs * stride_am, mask=valid, other=0.0)
    w = tl.sum(qt * (y * alpha)[None, :], axis=1)
    for _s in range(sweeps):
        for i in range(m):
            sel = offs == i
            w_i = tl.sum(tl.where(sel, w, 0.0), axis=0)
            y_i = tl.sum(tl.where(sel, y, 0.0), axis=0)
            a_i = tl.sum(tl.where(sel, alpha, 0.0), axis=0)
            d_i = tl.sum(tl.where(sel, inv_diag, 0.0), axis=0)
            g = y_i * w_i - 1.0
            new = tl.minimum(tl.maximum(a_i - g * d_i, 0.0), c)
            dz = (new - a_i) * y_i
            alpha = tl.where(sel, new, alpha)
            q_row = tl.sum(tl.where(rows == i, qt, 0.0), axis=0)
            w = w + dz * q_row
    g = y * w - 1.0
    proj = tl.minimum(tl.maximum(alpha - g, 0.0), c)
    res = tl.where(valid, tl.abs(alpha - proj), 0.0)
    tl.store(a_ptr + pid * stride_ob + offs * stride_om, alpha, mask=valid)
    tl.store(kkt_ptr + pid, tl.max(res, axis=0))


def box_qp_triton(q: torch.Tensor, y: torch.Tensor, alpha0: torch.Tensor, c: float, sweeps: int):
    """Launch one program per row of ``y``; returns ``(alpha [B, m], kkt_residual [B])``."""
    b, m = y.shape
    if m > MAX_M:
        raise ValueError(f"the Triton box-QP kernel holds Q in registers and supports m <= {MAX_M}, got m = {m}")
    alpha = torch.empty_like(alpha0)
    kkt = torch.empty(b, dtype=alpha0.dtype, device=alpha0.device)
    if b == 0:
        return alpha, kkt
    block = max(16, triton.next_power_of_2(m))
    _box_qp_kernel[(b,)](
        q, y, alpha0, alpha, kkt, m, float(c), int(sweeps), big_step(q.dtype),
        q.stride(0), q.stride(1), y.stride(0), y.stride(1), alpha0.stride(0), alpha0.stride(1),
        alpha.stride(0), alpha.stride(1),
        BLOCK_M=block, num_warps=4 if block <= 32 else 8,
    )  # fmt: skip
    return alpha, kkt
