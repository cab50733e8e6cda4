"""Fused Gaussian-KDE log-density in Triton (reference: ``kde_reference`` in kernels/reference.py).

Forward: each program owns BLOCK_M queries and streams over the training points in tiles of BLOCK_N, computing the
squared distances ||q||^2 + ||t||^2 - 2 q.t with ``tl.dot`` (fp32, IEEE precision) and keeping an online
log-sum-exp (running max m and scaled sum l), like flash attention. The [M, n] distance matrix never exists.

Backward (gradient with respect to the queries only): d lse_i / d q_i = (mu_i - q_i) / h^2, where
mu_i = sum_j softmax_j(s_ij) t_j is the kernel-weighted mean of the training points; a second kernel recomputes the
tile scores from the saved lse and accumulates mu with ``tl.dot``. Training points and bandwidth get no gradient.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from iclr25.shared import is_interpreting, next_power_of_2

__all__ = ["kde_triton", "KDELogDensity"]

MAX_DIM = 256


@triton.jit
def _scores(q, qn, T, offs_n, offs_d, N, D, stride_t, neg_inv_2h2):
    t = tl.load(
        T + offs_n[:, None] * stride_t + offs_d[None, :], mask=(offs_n[:, None] < N) & (offs_d[None, :] < D), other=0.0
    )
    tn = tl.sum(t * t, axis=1)
    dot = tl.dot(q, tl.trans(t), input_precision="ieee")
    d2 = tl.maximum(qn[:, None] + tn[None, :] - 2.0 * dot, 0.0)
    s = tl.where(offs_n[None, :] < N, d2 * neg_inv_2h2, float("-inf"))
    return s, t


@triton.jit
def _kde_fwd_kernel(
    Q,
    T,
    LSE,
    M,
    N,
    D,
    stride_q,
    stride_t,
    neg_inv_2h2,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid = tl.program_id(0)
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = tl.load(
        Q + offs_m[:, None] * stride_q + offs_d[None, :], mask=(offs_m[:, None] < M) & (offs_d[None, :] < D), other=0.0
    )
    qn = tl.sum(q * q, axis=1)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    for start in range(0, N, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        s, t = _scores(q, qn, T, offs_n, offs_d, N, D, stride_t, neg_inv_2h2)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
        m_i = m_new
    tl.store(LSE + offs_m, m_i + tl.log(l_i), mask=offs_m < M)


@triton.jit
def _kde_bwd_kernel(
    Q,
    T,
    LSE,
    MU,
    M,
    N,
    D,
    stride_q,
    stride_t,
    stride_mu,
    neg_inv_2h2,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid = tl.program_id(0)
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = tl.load(
        Q + offs_m[:, None] * stride_q + offs_d[None, :], mask=(offs_m[:, None] < M) & (offs_d[None, :] < D), other=0.0
    )
    qn = tl.sum(q * q, axis=1)
    lse = tl.load(LSE + offs_m, mask=offs_m < M, other=0.0)
    mu = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    for start in range(0, N, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        s, t = _scores(q, qn, T, offs_n, offs_d, N, D, stride_t, neg_inv_2h2)
        p = tl.exp(s - lse[:, None])
        mu += tl.dot(p, t, input_precision="ieee")
    tl.store(MU + offs_m[:, None] * stride_mu + offs_d[None, :], mu, mask=(offs_m[:, None] < M) & (offs_d[None, :] < D))


def _blocks(d: int) -> tuple[int, int, int]:
    block_d = max(16, next_power_of_2(d))
    if is_interpreting():
        return 16, 16, block_d
    return 64, (64 if block_d <= 64 else 32), block_d


def _lse_forward(q: torch.Tensor, t: torch.Tensor, h: float) -> torch.Tensor:
    M, D = q.shape
    N = t.shape[0]
    lse = torch.empty(M, device=q.device, dtype=torch.float32)
    bm, bn, bd = _blocks(D)
    _kde_fwd_kernel[(triton.cdiv(M, bm),)](
        q, t, lse, M, N, D, q.stride(0), t.stride(0), -1.0 / (2.0 * h * h), BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd
    )
    return lse


def _weighted_mean(q: torch.Tensor, t: torch.Tensor, lse: torch.Tensor, h: float) -> torch.Tensor:
    M, D = q.shape
    mu = torch.empty(M, D, device=q.device, dtype=torch.float32)
    bm, bn, bd = _blocks(D)
    _kde_bwd_kernel[(triton.cdiv(M, bm),)](
        q,
        t,
        lse,
        mu,
        M,
        t.shape[0],
        D,
        q.stride(0),
        t.stride(0),
        mu.stride(0),
        -1.0 / (2.0 * h * h),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_D=bd,
    )
    return mu


class KDELogDensity(torch.autograd.Function):
    """log p(q) of a Gaussian KDE; differentiable with respect to the queries."""

    @staticmethod
    def forward(ctx, queries: torch.Tensor, train: torch.Tensor, bandwidth: float) -> torch.Tensor:
        q = queries.detach().to(torch.float32).contiguous()
        t = train.detach().to(torch.float32).contiguous()
        lse = _lse_forward(q, t, bandwidth)
        ctx.save_for_backward(q, t, lse)
        ctx.bandwidth = bandwidth
        n, d = train.shape
        const = math.log(n) + 0.5 * d * math.log(2.0 * math.pi * bandwidth * bandwidth)
        return (lse - const).to(queries.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        q, t, lse = ctx.saved_tensors
        h = ctx.bandwidth
        mu = _weighted_mean(q, t, lse, h)
        grad_q = grad_out.to(torch.float32)[:, None] * (mu - q) / (h * h)
        return grad_q.to(grad_out.dtype), None, None


def kde_triton(queries: torch.Tensor, train: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """Triton Gaussian-KDE log-density (fp32 compute; output in the queries' dtype)."""
    if queries.shape[1] > MAX_DIM:
        raise ValueError(
            f"the Triton KDE supports d <= {MAX_DIM} features, got d = {queries.shape[1]}; use backend='torch'"
        )
    if train.requires_grad:
        raise ValueError(
            "the Triton KDE differentiates with respect to the queries only; detach the training points "
            "or use backend='torch'"
        )
    if queries.device != train.device:
        raise ValueError(f"queries and train must be on the same device, got {queries.device} and {train.device}")
    if queries.shape[0] == 0:
        return queries.new_zeros(0)
    return KDELogDensity.apply(queries, train, float(bandwidth))
