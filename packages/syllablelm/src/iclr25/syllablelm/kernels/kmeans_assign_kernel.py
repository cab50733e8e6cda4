"""Triton fused k-means assignment: ``argmin_k ||x||^2 - 2 x.c_k + ||c_k||^2`` with a running argmin over centroid
tiles, so the N x K distance matrix is never materialised. Ties go to the lowest index.

Reference: ``kmeans_assign_reference`` in ``kernels/reference.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from iclr25.shared import next_power_of_2


@triton.jit
def _kmeans_assign_kernel(
    x_ptr, c_ptr, out_ptr, N, K, D, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < N
    best = tl.full([BLOCK_N], float("inf"), tl.float32)
    arg = tl.zeros([BLOCK_N], dtype=tl.int64)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        cmask = cols < K
        dot = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        xn = tl.zeros([BLOCK_N], dtype=tl.float32)
        cn = tl.zeros([BLOCK_K], dtype=tl.float32)
        for d0 in range(0, D, BLOCK_D):
            dd = d0 + tl.arange(0, BLOCK_D)
            dmask = dd < D
            xt = tl.load(x_ptr + rows[:, None] * D + dd[None, :], mask=rmask[:, None] & dmask[None, :], other=0.0)
            ct = tl.load(c_ptr + cols[:, None] * D + dd[None, :], mask=cmask[:, None] & dmask[None, :], other=0.0)
            xt = xt.to(tl.float32)
            ct = ct.to(tl.float32)
            dot += tl.dot(xt, tl.trans(ct), input_precision="ieee")
            xn += tl.sum(xt * xt, axis=1)
            cn += tl.sum(ct * ct, axis=1)
        dist = xn[:, None] - 2.0 * dot + cn[None, :]
        dist = tl.where(cmask[None, :], dist, float("inf"))
        tile_min = tl.min(dist, axis=1)
        is_min = dist == tile_min[:, None]
        tile_arg = tl.min(tl.where(is_min, cols[None, :], K), axis=1).to(tl.int64)
        better = tile_min < best
        best = tl.where(better, tile_min, best)
        arg = tl.where(better, tile_arg, arg)
    tl.store(out_ptr + rows, arg, mask=rmask)


def kmeans_assign_triton(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    c = centroids.to(x.device).contiguous()
    n, d = x.shape
    k = c.shape[0]
    out = torch.zeros(n, dtype=torch.int64, device=x.device)
    if n == 0:
        return out
    block_n, block_k = 16, min(64, max(16, next_power_of_2(k)))
    block_d = min(64, max(16, next_power_of_2(d)))
    _kmeans_assign_kernel[(triton.cdiv(n, block_n),)](
        x, c, out, n, k, d, BLOCK_N=block_n, BLOCK_K=block_k, BLOCK_D=block_d
    )
    return out
