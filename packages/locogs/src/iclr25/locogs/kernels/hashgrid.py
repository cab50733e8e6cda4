"""Triton multi-resolution hash encoding: forward (8-corner gather, trilinear weights,
the features accumulated in registers and stored once per point and level) and backward (atomic scatter
into the table). One program per (block of points, level). Reference: ``hashgrid_reference`` in
``kernels/reference.py`` (tiny-cuda-nn semantics)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _corner(px, py, pz, res, size, dense, bit_x: tl.constexpr, bit_y: tl.constexpr, bit_z: tl.constexpr):
    cx, cy, cz = tl.floor(px), tl.floor(py), tl.floor(pz)
    fx, fy, fz = px - cx, py - cy, pz - cz
    gx = cx.to(tl.int64) + bit_x
    gy = cy.to(tl.int64) + bit_y
    gz = cz.to(tl.int64) + bit_z
    wx = fx if bit_x else 1.0 - fx
    wy = fy if bit_y else 1.0 - fy
    wz = fz if bit_z else 1.0 - fz
    idx_dense = gx + gy * res + gz * res * res
    idx_hash = ((gx * 1) ^ (gy * 2654435761) ^ (gz * 805459861)) & 0xFFFFFFFF
    idx = tl.where(dense != 0, idx_dense, idx_hash) % size
    return idx, wx * wy * wz


@triton.jit
def _scaled_points(p_ptr, offs, pm, scale):
    px = tl.load(p_ptr + offs * 3, mask=pm, other=0.0) * scale + 0.5
    py = tl.load(p_ptr + offs * 3 + 1, mask=pm, other=0.0) * scale + 0.5
    pz = tl.load(p_ptr + offs * 3 + 2, mask=pm, other=0.0) * scale + 0.5
    return px, py, pz


@triton.jit
def _hashgrid_fwd_kernel(p_ptr, table_ptr, out_ptr, scale_ptr, res_ptr, size_ptr, off_ptr, dense_ptr, N,
                         L: tl.constexpr, F: tl.constexpr, FP: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    pid, lvl = tl.program_id(0), tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    pm = offs < N
    scale = tl.load(scale_ptr + lvl)
    res = tl.load(res_ptr + lvl)
    size = tl.load(size_ptr + lvl)
    base = tl.load(off_ptr + lvl)
    dense = tl.load(dense_ptr + lvl)
    px, py, pz = _scaled_points(p_ptr, offs, pm, scale)
    fidx = tl.arange(0, FP)
    m2 = pm[:, None] & (fidx[None, :] < F)
    acc = tl.zeros([BLOCK, FP], dtype=tl.float32)  # the F features of 8 corners accumulate in registers
    for c in tl.static_range(8):
        idx, w = _corner(px, py, pz, res, size, dense, c & 1, (c >> 1) & 1, (c >> 2) & 1)
        v = tl.load(table_ptr + (base + idx)[:, None] * F + fidx[None, :], mask=m2, other=0.0)
        acc += w[:, None] * v
    tl.store(out_ptr + offs[:, None] * (L * F) + lvl * F + fidx[None, :], acc, mask=m2)


@triton.jit
def _hashgrid_bwd_kernel(p_ptr, g_out_ptr, g_table_ptr, scale_ptr, res_ptr, size_ptr, off_ptr, dense_ptr, N,
                         L: tl.constexpr, F: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    pid, lvl = tl.program_id(0), tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    pm = offs < N
    scale = tl.load(scale_ptr + lvl)
    res = tl.load(res_ptr + lvl)
    size = tl.load(size_ptr + lvl)
    base = tl.load(off_ptr + lvl)
    dense = tl.load(dense_ptr + lvl)
    px, py, pz = _scaled_points(p_ptr, offs, pm, scale)
    for c in tl.static_range(8):
        idx, w = _corner(px, py, pz, res, size, dense, c & 1, (c >> 1) & 1, (c >> 2) & 1)
        for f in tl.static_range(F):
            g = tl.load(g_out_ptr + offs * (L * F) + lvl * F + f, mask=pm, other=0.0)
            tl.atomic_add(g_table_ptr + (base + idx) * F + f, w * g, mask=pm)


def _levels(layout, device):
    lv = layout.level_tensors(device)
    return (lv["scale"].float().contiguous(), lv["resolution"].contiguous(), lv["size"].contiguous(),
            lv["offset"].contiguous(), lv["dense"].to(torch.int32).contiguous())  # fmt: skip


class _HashGridFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points, table, layout):
        p = points.detach().float().contiguous()
        n, L, F = p.shape[0], layout.n_levels, layout.features_per_level
        out = torch.empty(n, L * F, device=p.device, dtype=torch.float32)
        levels = _levels(layout, p.device)
        block = 64
        if n:  # an empty launch grid is an error on some triton versions
            _hashgrid_fwd_kernel[(triton.cdiv(n, block), L)](
                p, table.detach().float().contiguous(), out, *levels, n, L=L, F=F, FP=triton.next_power_of_2(F),
                BLOCK=block,
            )  # fmt: skip
        ctx.save_for_backward(p)
        ctx.layout, ctx.levels, ctx.table_meta = layout, levels, (table.shape, table.dtype)
        return out.to(table.dtype)

    @staticmethod
    def backward(ctx, g_out):
        (p,) = ctx.saved_tensors
        layout = ctx.layout
        shape, dtype = ctx.table_meta
        g_table = torch.zeros(shape, device=p.device, dtype=torch.float32)
        n, L, F = p.shape[0], layout.n_levels, layout.features_per_level
        block = 64
        if n:
            _hashgrid_bwd_kernel[(triton.cdiv(n, block), L)](
                p, g_out.float().contiguous(), g_table, *ctx.levels, n, L=L, F=F, BLOCK=block
            )
        return None, g_table.to(dtype), None


def hashgrid_triton(points01: torch.Tensor, table: torch.Tensor, layout) -> torch.Tensor:
    """Triton version of ``hashgrid_reference`` (no gradient to the points)."""
    if points01.dim() != 2 or points01.shape[1] != 3:
        raise ValueError(f"hash grid: points must be [N, 3], got {tuple(points01.shape)}")
    return _HashGridFn.apply(points01, table, layout)
