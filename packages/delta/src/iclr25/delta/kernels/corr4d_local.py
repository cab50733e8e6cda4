"""Triton local 4D correlation (reference: ``corr4d_local_reference`` in ``reference.py``).

Forward, one program per (b, t, n): the P^2 target taps are bilinearly gathered straight from the channels-last
feature map (align_corners pixel coordinates, border padding), chunk by chunk over channels, and multiplied with the
P^2 support vectors by a padded ``tl.dot``; the [B, T, N, P^2, C] target tensor is never materialised.

Backward, one program per (b, n) looping over t: grad_supp = g^T @ target is accumulated in registers (deterministic);
grad_target = g @ supp is scattered into grad_fmap with the bilinear weights by ``tl.atomic_add``.
Coordinates are treated as constants (the model detaches them), so no gradient is returned for them.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from iclr25.shared import next_power_of_2


@triton.jit
def _bilinear_taps(coords_ptr, cidx, H, W, k, R: tl.constexpr, P: tl.constexpr):
    x = tl.load(coords_ptr + cidx * 2).to(tl.float32)
    y = tl.load(coords_ptr + cidx * 2 + 1).to(tl.float32)
    px = x + (k // P - R).to(tl.float32)  # tap k = i * P + j: dx = i - R, dy = j - R (see sampling.patch_offsets)
    py = y + (k % P - R).to(tl.float32)
    px = tl.minimum(tl.maximum(px, 0.0), (W - 1).to(tl.float32))
    py = tl.minimum(tl.maximum(py, 0.0), (H - 1).to(tl.float32))
    x0f = tl.floor(px)
    y0f = tl.floor(py)
    wx = px - x0f
    wy = py - y0f
    x0 = x0f.to(tl.int32)
    y0 = y0f.to(tl.int32)
    x1 = tl.minimum(x0 + 1, W - 1)
    y1 = tl.minimum(y0 + 1, H - 1)
    return x0, x1, y0, y1, wx, wy


@triton.jit
def _corr4d_fwd_kernel(
    fmap_ptr, coords_ptr, supp_ptr, out_ptr, T, N, H, W, C, scale,
    R: tl.constexpr, P: tl.constexpr, P2: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)  # over B*T*N
    n = pid % N
    bt = pid // N
    b = bt // T
    k = tl.arange(0, BLOCK_K)
    kmask = k < P2
    x0, x1, y0, y1, wx, wy = _bilinear_taps(coords_ptr, pid, H, W, k, R, P)
    base = fmap_ptr + bt.to(tl.int64) * H * W * C
    o00 = (y0 * W + x0).to(tl.int64) * C
    o01 = (y0 * W + x1).to(tl.int64) * C
    o10 = (y1 * W + x0).to(tl.int64) * C
    o11 = (y1 * W + x1).to(tl.int64) * C
    w00 = ((1.0 - wy) * (1.0 - wx))[:, None]
    w01 = ((1.0 - wy) * wx)[:, None]
    w10 = (wy * (1.0 - wx))[:, None]
    w11 = (wy * wx)[:, None]
    supp_base = supp_ptr + (b * N + n).to(tl.int64) * P2 * C
    acc = tl.zeros((BLOCK_K, BLOCK_K), dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        cc = c0 + tl.arange(0, BLOCK_C)
        m2 = kmask[:, None] & (cc < C)[None, :]
        cco = cc[None, :]
        tgt = w00 * tl.load(base + o00[:, None] + cco, mask=m2, other=0.0).to(tl.float32)
        tgt += w01 * tl.load(base + o01[:, None] + cco, mask=m2, other=0.0).to(tl.float32)
        tgt += w10 * tl.load(base + o10[:, None] + cco, mask=m2, other=0.0).to(tl.float32)
        tgt += w11 * tl.load(base + o11[:, None] + cco, mask=m2, other=0.0).to(tl.float32)
        s = tl.load(supp_base + k[:, None] * C + cco, mask=m2, other=0.0).to(tl.float32)
        acc += tl.dot(tgt, tl.trans(s))
    acc = acc * scale
    out_base = out_ptr + pid.to(tl.int64) * P2 * P2
    omask = kmask[:, None] & kmask[None, :]
    tl.store(out_base + k[:, None] * P2 + k[None, :], acc.to(out_ptr.dtype.element_ty), mask=omask)


@triton.jit
def _corr4d_bwd_kernel(
    fmap_ptr, coords_ptr, supp_ptr, gout_ptr, gfmap_ptr, gsupp_ptr, T, N, H, W, C, scale,
    R: tl.constexpr, P: tl.constexpr, P2: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)  # over B*N
    n = pid % N
    b = pid // N
    c_blk = tl.program_id(1)
    k = tl.arange(0, BLOCK_K)
    kmask = k < P2
    cc = c_blk * BLOCK_C + tl.arange(0, BLOCK_C)
    m2 = kmask[:, None] & (cc < C)[None, :]
    cco = cc[None, :]
    supp_base = supp_ptr + pid.to(tl.int64) * P2 * C
    s = tl.load(supp_base + k[:, None] * C + cco, mask=m2, other=0.0).to(tl.float32)
    gs = tl.zeros((BLOCK_K, BLOCK_C), dtype=tl.float32)
    gmask = kmask[:, None] & kmask[None, :]
    for t in range(0, T):
        bt = b * T + t
        cidx = bt * N + n
        x0, x1, y0, y1, wx, wy = _bilinear_taps(coords_ptr, cidx, H, W, k, R, P)
        base = fmap_ptr + bt.to(tl.int64) * H * W * C
        gbase = gfmap_ptr + bt.to(tl.int64) * H * W * C
        o00 = (y0 * W + x0).to(tl.int64) * C
        o01 = (y0 * W + x1).to(tl.int64) * C
        o10 = (y1 * W + x0).to(tl.int64) * C
        o11 = (y1 * W + x1).to(tl.int64) * C
        w00 = ((1.0 - wy) * (1.0 - wx))[:, None]
        w01 = ((1.0 - wy) * wx)[:, None]
        w10 = (wy * (1.0 - wx))[:, None]
        w11 = (wy * wx)[:, None]
        tgt = w00 * tl.load(base + o00[:, None] + cco, mask=m2, other=0.0).to(tl.float32)
        tgt += w01 * tl.load(base + o01[:, None] + cco, mask=m2, other=0.0).to(tl.float32)
        tgt += w10 * tl.load(base + o10[:, None] + cco, mask=m2, other=0.0).to(tl.float32)
        tgt += w11 * tl.load(base + o11[:, None] + cco, mask=m2, other=0.0).to(tl.float32)
        g = tl.load(gout_ptr + cidx.to(tl.int64) * P2 * P2 + k[:, None] * P2 + k[None, :], mask=gmask, other=0.0)
        g = g.to(tl.float32) * scale  # [k (target tap), j (support tap)]
        gs += tl.dot(tl.trans(g), tgt)  # grad wrt supp rows j
        gt = tl.dot(g, s)  # grad wrt target taps k
        tl.atomic_add(gbase + o00[:, None] + cco, w00 * gt, mask=m2)
        tl.atomic_add(gbase + o01[:, None] + cco, w01 * gt, mask=m2)
        tl.atomic_add(gbase + o10[:, None] + cco, w10 * gt, mask=m2)
        tl.atomic_add(gbase + o11[:, None] + cco, w11 * gt, mask=m2)
    tl.store(gsupp_ptr + pid.to(tl.int64) * P2 * C + k[:, None] * C + cco, gs, mask=m2)


def _blocks(radius: int, c: int) -> tuple[int, int, int, int]:
    p = 2 * radius + 1
    p2 = p * p
    return p, p2, max(16, next_power_of_2(p2)), max(16, min(64, next_power_of_2(c)))


class _Corr4dLocal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fmap, coords, supp, radius):
        fmap, coords, supp = fmap.contiguous(), coords.detach().contiguous(), supp.contiguous()
        b, t, h, w, c = fmap.shape
        n = coords.shape[2]
        p, p2, block_k, block_c = _blocks(radius, c)
        out = torch.empty((b, t, n, p2, p2), device=fmap.device, dtype=fmap.dtype)
        scale = 1.0 / math.sqrt(c)
        if b * t * n > 0:
            _corr4d_fwd_kernel[(b * t * n,)](
                fmap, coords, supp.to(fmap.dtype), out, t, n, h, w, c, scale,
                R=radius, P=p, P2=p2, BLOCK_K=block_k, BLOCK_C=block_c,
            )  # fmt: skip
        ctx.save_for_backward(fmap, coords, supp)
        ctx.radius = radius
        return out

    @staticmethod
    def backward(ctx, gout):
        fmap, coords, supp = ctx.saved_tensors
        radius = ctx.radius
        b, t, h, w, c = fmap.shape
        n = coords.shape[2]
        p, p2, block_k, block_c = _blocks(radius, c)
        gfmap = torch.zeros(fmap.shape, device=fmap.device, dtype=torch.float32)
        gsupp = torch.zeros(supp.shape, device=supp.device, dtype=torch.float32)
        if b * t * n > 0:
            _corr4d_bwd_kernel[(b * n, triton.cdiv(c, block_c))](
                fmap, coords, supp.to(fmap.dtype), gout.contiguous(), gfmap, gsupp, t, n, h, w, c, 1.0 / math.sqrt(c),
                R=radius, P=p, P2=p2, BLOCK_K=block_k, BLOCK_C=block_c,
            )  # fmt: skip
        return gfmap.to(fmap.dtype), None, gsupp.to(supp.dtype), None


def corr4d_local_triton(fmap: torch.Tensor, coords: torch.Tensor, supp: torch.Tensor, radius: int) -> torch.Tensor:
    """Triton path of ``iclr25.delta.kernels.local_corr4d`` (same signature and result as the reference)."""
    return _Corr4dLocal.apply(fmap, coords, supp, radius)
