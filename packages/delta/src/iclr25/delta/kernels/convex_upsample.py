"""Triton convex upsampling (reference: ``convex_upsample_reference`` in ``reference.py``).

out[b, c, Y, X] = sum_k w[b, k, Y, X] * x[b, c, Y//f + ky - K//2, X//f + kx - K//2] (zero outside). The forward
reads each low-resolution tap directly, so the K^2-times unfolded and f^2-times upsampled tensor of the reference is
never built. The backward is a deterministic gather (no atomics): grad_w sums g * x over channels per tap, and
grad_x[c, i, j] sums w * g over every fine pixel whose neighbourhood contains the low-resolution cell (i, j).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from iclr25.shared import next_power_of_2


@triton.jit
def _convex_fwd_kernel(
    x_ptr, w_ptr, out_ptr, C, h, w, HF, WF,
    F: tl.constexpr, K: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    p = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    cc = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    npix = HF * WF
    pmask = p < npix
    cmask = cc < C
    Y = p // WF
    X = p % WF
    iy = Y // F
    ix = X // F
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    xb = x_ptr + b.to(tl.int64) * C * h * w
    wb = w_ptr + b.to(tl.int64) * K * K * npix
    for k in range(0, K * K):
        sy = iy + k // K - K // 2
        sx = ix + k % K - K // 2
        inside = pmask & (sy >= 0) & (sy < h) & (sx >= 0) & (sx < w)
        wk = tl.load(wb + k * npix + p, mask=pmask, other=0.0).to(tl.float32)
        xv = tl.load(
            xb + cc[None, :] * (h * w) + (sy * w + sx)[:, None], mask=inside[:, None] & cmask[None, :], other=0.0
        )
        acc += wk[:, None] * xv.to(tl.float32)
    ob = out_ptr + b.to(tl.int64) * C * npix
    tl.store(
        ob + cc[None, :] * npix + p[:, None], acc.to(out_ptr.dtype.element_ty), mask=pmask[:, None] & cmask[None, :]
    )


@triton.jit
def _convex_bwd_w_kernel(
    x_ptr, g_ptr, gw_ptr, C, h, w, HF, WF,
    F: tl.constexpr, K: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    p = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    npix = HF * WF
    pmask = p < npix
    Y = p // WF
    X = p % WF
    iy = Y // F
    ix = X // F
    xb = x_ptr + b.to(tl.int64) * C * h * w
    gb = g_ptr + b.to(tl.int64) * C * npix
    for k in range(0, K * K):
        sy = iy + k // K - K // 2
        sx = ix + k % K - K // 2
        inside = pmask & (sy >= 0) & (sy < h) & (sx >= 0) & (sx < w)
        acc = tl.zeros((BLOCK_P,), dtype=tl.float32)
        for c0 in range(0, C, BLOCK_C):
            cc = c0 + tl.arange(0, BLOCK_C)
            cmask = cc < C
            xv = tl.load(
                xb + cc[None, :] * (h * w) + (sy * w + sx)[:, None], mask=inside[:, None] & cmask[None, :], other=0.0
            )
            gv = tl.load(gb + cc[None, :] * npix + p[:, None], mask=pmask[:, None] & cmask[None, :], other=0.0)
            acc += tl.sum(xv.to(tl.float32) * gv.to(tl.float32), axis=1)
        tl.store(gw_ptr + b.to(tl.int64) * K * K * npix + k * npix + p, acc, mask=pmask)


@triton.jit
def _convex_bwd_x_kernel(
    w_ptr, g_ptr, gx_ptr, C, h, w, HF, WF,
    F: tl.constexpr, K: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    q = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)  # low-resolution cells
    cc = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    qmask = q < h * w
    cmask = cc < C
    i = q // w
    j = q % w
    npix = HF * WF
    wb = w_ptr + b.to(tl.int64) * K * K * npix
    gb = g_ptr + b.to(tl.int64) * C * npix
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for k in range(0, K * K):
        # fine pixels whose parent cell (py, px) sees cell (i, j) through tap k
        py = i - (k // K - K // 2)
        px = j - (k % K - K // 2)
        valid = qmask & (py >= 0) & (py < h) & (px >= 0) & (px < w)
        for s in range(0, F * F):
            Y = py * F + s // F
            X = px * F + s % F
            pix = Y * WF + X
            wk = tl.load(wb + k * npix + pix, mask=valid, other=0.0).to(tl.float32)
            gv = tl.load(gb + cc[None, :] * npix + pix[:, None], mask=valid[:, None] & cmask[None, :], other=0.0)
            acc += wk[:, None] * gv.to(tl.float32)
    xb = gx_ptr + b.to(tl.int64) * C * h * w
    tl.store(xb + cc[None, :] * (h * w) + q[:, None], acc, mask=qmask[:, None] & cmask[None, :])


def _block_c(c: int) -> int:
    return max(2, min(32, next_power_of_2(c)))


class _ConvexUpsample(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weights, factor, kernel):
        x, weights = x.contiguous(), weights.contiguous()
        b, c, h, w = x.shape
        hf, wf = h * factor, w * factor
        out = torch.empty((b, c, hf, wf), device=x.device, dtype=x.dtype)
        block_p, block_c = 64, _block_c(c)
        grid = (b, triton.cdiv(hf * wf, block_p), triton.cdiv(c, block_c))
        if b * c * h * w > 0:
            _convex_fwd_kernel[grid](
                x, weights, out, c, h, w, hf, wf, F=factor, K=kernel, BLOCK_P=block_p, BLOCK_C=block_c
            )
        ctx.save_for_backward(x, weights)
        ctx.factor, ctx.kernel = factor, kernel
        return out

    @staticmethod
    def backward(ctx, g):
        x, weights = ctx.saved_tensors
        factor, kernel = ctx.factor, ctx.kernel
        g = g.contiguous()
        b, c, h, w = x.shape
        hf, wf = h * factor, w * factor
        gx = torch.zeros((b, c, h, w), device=x.device, dtype=torch.float32)
        gw = torch.zeros(weights.shape, device=x.device, dtype=torch.float32)
        block_p, block_c = 64, _block_c(c)
        if b * c * h * w > 0:
            _convex_bwd_w_kernel[(b, triton.cdiv(hf * wf, block_p))](
                x, g, gw, c, h, w, hf, wf, F=factor, K=kernel, BLOCK_P=block_p, BLOCK_C=block_c
            )
            _convex_bwd_x_kernel[(b, triton.cdiv(h * w, block_p), triton.cdiv(c, block_c))](
                weights, g, gx, c, h, w, hf, wf, F=factor, K=kernel, BLOCK_P=block_p, BLOCK_C=block_c
            )
        return gx.to(x.dtype), gw.to(weights.dtype), None, None


def convex_upsample_triton(x: torch.Tensor, weights: torch.Tensor, factor: int, kernel: int) -> torch.Tensor:
    """Triton path of ``iclr25.delta.kernels.upsample_convex`` (same signature and result as the reference)."""
    return _ConvexUpsample.apply(x, weights, factor, kernel)
