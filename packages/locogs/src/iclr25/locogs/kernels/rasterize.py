"""Triton tile rasterizer: forward and backward, one program per 16x16 tile.

Each program walks the tile's depth-sorted Gaussians in blocks of BLOCK_G, evaluates a [TILE*TILE, BLOCK_G] alpha
block, gets transmittance with ``tl.cumprod`` and carries T (and a per-pixel "done" flag for the T < 1e-4 stop)
across blocks; the loop ends as soon as every pixel of the tile is done. The backward recomputes the same forward
in the same order, keeps a running colour prefix so the colour of everything behind Gaussian i is (final colour -
prefix), and scatters per-Gaussian gradients with ``tl.atomic_add``. Reference: ``rasterize_reference`` in ``kernels/reference.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..binning import bin_gaussians
from ..config import DEFAULT_RASTER, RasterConfig
from .reference import _check_raster_inputs


@triton.jit
def _load_block(means2d_ptr, conics_ptr, opac_ptr, radii_ptr, gids_ptr, offs, gm):
    gid = tl.load(gids_ptr + offs, mask=gm, other=0)
    mx = tl.load(means2d_ptr + gid * 2, mask=gm, other=0.0)
    my = tl.load(means2d_ptr + gid * 2 + 1, mask=gm, other=0.0)
    ca = tl.load(conics_ptr + gid * 3, mask=gm, other=0.0)
    cb = tl.load(conics_ptr + gid * 3 + 1, mask=gm, other=0.0)
    cc = tl.load(conics_ptr + gid * 3 + 2, mask=gm, other=0.0)
    op = tl.load(opac_ptr + gid, mask=gm, other=0.0)
    rad = tl.load(radii_ptr + gid, mask=gm, other=0).to(tl.float32)
    return gid, mx, my, ca, cb, cc, op, rad


@triton.jit
def _alpha_block(fx, fy, inside, gm, mx, my, ca, cb, cc, op, rad, alpha_max, alpha_min, SQUARE: tl.constexpr):
    dx = mx[None, :] - fx[:, None]
    dy = my[None, :] - fy[:, None]
    sigma = 0.5 * (ca[None, :] * dx * dx + cc[None, :] * dy * dy) + cb[None, :] * dx * dy
    e = tl.exp(-sigma)
    alpha = tl.minimum(op[None, :] * e, alpha_max)
    valid = gm[None, :] & inside[:, None] & (sigma >= 0) & (alpha >= alpha_min)
    if SQUARE:  # square footprint; otherwise the whole tile (the binning already lists only touched tiles)
        valid = valid & (tl.abs(dx) <= rad[None, :]) & (tl.abs(dy) <= rad[None, :])
    alpha = tl.where(valid, alpha, 0.0)
    return alpha, valid, dx, dy, e


@triton.jit
def _rasterize_fwd_kernel(
    means2d_ptr, conics_ptr, colors_ptr, opac_ptr, radii_ptr, offsets_ptr, gids_ptr, bg_ptr,
    out_color_ptr, out_t_ptr,
    W, H, n_tiles_x, alpha_max, alpha_min, t_min,
    C: tl.constexpr, CP: tl.constexpr, TILE: tl.constexpr, BLOCK_G: tl.constexpr, SQUARE: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0)
    pix = tl.arange(0, TILE * TILE)
    px = (tile % n_tiles_x) * TILE + pix % TILE
    py = (tile // n_tiles_x) * TILE + pix // TILE
    inside = (px < W) & (py < H)
    fx = px.to(tl.float32) + 0.5
    fy = py.to(tl.float32) + 0.5
    start = tl.load(offsets_ptr + tile)
    end = tl.load(offsets_ptr + tile + 1)
    cidx = tl.arange(0, CP)
    T = tl.full([TILE * TILE], 1.0, tl.float32)
    done = tl.zeros([TILE * TILE], dtype=tl.int32)
    acc = tl.zeros([TILE * TILE, CP], dtype=tl.float32)
    # walk the depth-sorted list; stop once every pixel of the tile has saturated (T would drop below t_min)
    g0 = start
    n_live = tl.sum(tl.where(inside, 1, 0))
    while (g0 < end) & (n_live > 0):
        offs = g0 + tl.arange(0, BLOCK_G)
        gm = offs < end
        gid, mx, my, ca, cb, cc, op, rad = _load_block(means2d_ptr, conics_ptr, opac_ptr, radii_ptr, gids_ptr, offs, gm)
        alpha, valid, dx, dy, e = _alpha_block(
            fx, fy, inside, gm, mx, my, ca, cb, cc, op, rad, alpha_max, alpha_min, SQUARE
        )
        one_m = 1.0 - alpha
        t_incl = T[:, None] * tl.cumprod(one_m, axis=1)
        keep = (t_incl >= t_min) & (done[:, None] == 0)
        w = tl.where(keep, alpha * (t_incl / one_m), 0.0)
        for c in tl.static_range(C):
            col = tl.load(colors_ptr + gid * C + c, mask=gm, other=0.0)
            contrib = tl.sum(w * col[None, :], axis=1)
            acc += tl.where(cidx[None, :] == c, contrib[:, None], 0.0)
        stopped = tl.max(tl.where(valid & (t_incl < t_min), 1, 0), axis=1)
        T = tl.min(tl.where(keep, t_incl, T[:, None]), axis=1)
        done = tl.maximum(done, stopped)
        g0 += BLOCK_G
        n_live = tl.sum(tl.where(inside & (done == 0), 1, 0))
    bg = tl.load(bg_ptr + cidx, mask=cidx < C, other=0.0)
    out = acc + T[:, None] * bg[None, :]
    lin = py * W + px
    tl.store(out_color_ptr + lin[:, None] * C + cidx[None, :], out, mask=inside[:, None] & (cidx[None, :] < C))
    tl.store(out_t_ptr + lin, T, mask=inside)


@triton.jit
def _rasterize_bwd_kernel(
    means2d_ptr, conics_ptr, colors_ptr, opac_ptr, radii_ptr, offsets_ptr, gids_ptr, bg_ptr,
    out_color_ptr, out_t_ptr, g_color_ptr, g_alpha_ptr,
    g_means2d_ptr, g_conics_ptr, g_colors_ptr, g_opac_ptr,
    W, H, n_tiles_x, alpha_max, alpha_min, t_min,
    C: tl.constexpr, CP: tl.constexpr, TILE: tl.constexpr, BLOCK_G: tl.constexpr, SQUARE: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0)
    pix = tl.arange(0, TILE * TILE)
    px = (tile % n_tiles_x) * TILE + pix % TILE
    py = (tile // n_tiles_x) * TILE + pix // TILE
    inside = (px < W) & (py < H)
    lin = py * W + px
    fx = px.to(tl.float32) + 0.5
    fy = py.to(tl.float32) + 0.5
    start = tl.load(offsets_ptr + tile)
    end = tl.load(offsets_ptr + tile + 1)
    cidx = tl.arange(0, CP)
    cmask = inside[:, None] & (cidx[None, :] < C)
    t_final = tl.load(out_t_ptr + lin, mask=inside, other=1.0)
    g_a = tl.load(g_alpha_ptr + lin, mask=inside, other=0.0)
    bg = tl.load(bg_ptr + cidx, mask=cidx < C, other=0.0)
    # colour of everything in front of the background: final - T_final * bg
    c_fg = tl.load(out_color_ptr + lin[:, None] * C + cidx[None, :], mask=cmask, other=0.0) - t_final[:, None] * bg
    g_c = tl.load(g_color_ptr + lin[:, None] * C + cidx[None, :], mask=cmask, other=0.0)
    # behind-term constant: sum_c g_c * T_final * bg_c, and the alpha output's own gradient
    g_bg_term = tl.sum(g_c * bg[None, :], axis=1) * t_final
    T = tl.full([TILE * TILE], 1.0, tl.float32)
    done = tl.zeros([TILE * TILE], dtype=tl.int32)
    prefix = tl.zeros([TILE * TILE, CP], dtype=tl.float32)
    # walk the depth-sorted list; stop once every pixel of the tile has saturated (T would drop below t_min)
    g0 = start
    n_live = tl.sum(tl.where(inside, 1, 0))
    while (g0 < end) & (n_live > 0):
        offs = g0 + tl.arange(0, BLOCK_G)
        gm = offs < end
        gid, mx, my, ca, cb, cc, op, rad = _load_block(means2d_ptr, conics_ptr, opac_ptr, radii_ptr, gids_ptr, offs, gm)
        alpha, valid, dx, dy, e = _alpha_block(
            fx, fy, inside, gm, mx, my, ca, cb, cc, op, rad, alpha_max, alpha_min, SQUARE
        )
        one_m = 1.0 - alpha
        t_incl = T[:, None] * tl.cumprod(one_m, axis=1)
        keep = (t_incl >= t_min) & (done[:, None] == 0) & valid
        t_excl = t_incl / one_m
        w = tl.where(keep, alpha * t_excl, 0.0)
        # d loss / d alpha_i = sum_c g_c (c_i T_i - behind_i / (1 - a_i)) + g_alpha T_final / (1 - a_i)
        g_alpha = (g_a * t_final)[:, None] / one_m - g_bg_term[:, None] / one_m
        for c in tl.static_range(C):
            col = tl.load(colors_ptr + gid * C + c, mask=gm, other=0.0)
            gcc = tl.sum(tl.where(cidx[None, :] == c, g_c, 0.0), axis=1)
            fgc = tl.sum(tl.where(cidx[None, :] == c, c_fg, 0.0), axis=1)
            pre = tl.sum(tl.where(cidx[None, :] == c, prefix, 0.0), axis=1)
            wc = w * col[None, :]
            behind = fgc[:, None] - (pre[:, None] + tl.cumsum(wc, axis=1))
            g_alpha += gcc[:, None] * (col[None, :] * t_excl - behind / one_m)
            prefix += tl.where(cidx[None, :] == c, tl.sum(wc, axis=1)[:, None], 0.0)
            tl.atomic_add(g_colors_ptr + gid * C + c, tl.sum(gcc[:, None] * w, axis=0), mask=gm)
        # through alpha = min(0.99, o exp(-sigma)): zero gradient where clamped or not kept
        g_alpha = tl.where(keep & (op[None, :] * e < alpha_max), g_alpha, 0.0)
        g_sigma = -g_alpha * alpha
        tl.atomic_add(g_opac_ptr + gid, tl.sum(g_alpha * e, axis=0), mask=gm)
        tl.atomic_add(g_means2d_ptr + gid * 2, tl.sum(g_sigma * (ca[None, :] * dx + cb[None, :] * dy), axis=0), mask=gm)
        tl.atomic_add(
            g_means2d_ptr + gid * 2 + 1, tl.sum(g_sigma * (cb[None, :] * dx + cc[None, :] * dy), axis=0), mask=gm
        )
        tl.atomic_add(g_conics_ptr + gid * 3, tl.sum(g_sigma * 0.5 * dx * dx, axis=0), mask=gm)
        tl.atomic_add(g_conics_ptr + gid * 3 + 1, tl.sum(g_sigma * dx * dy, axis=0), mask=gm)
        tl.atomic_add(g_conics_ptr + gid * 3 + 2, tl.sum(g_sigma * 0.5 * dy * dy, axis=0), mask=gm)
        stopped = tl.max(tl.where(valid & (t_incl < t_min), 1, 0), axis=1)
        T = tl.min(tl.where(keep, t_incl, T[:, None]), axis=1)
        done = tl.maximum(done, stopped)
        g0 += BLOCK_G
        n_live = tl.sum(tl.where(inside & (done == 0), 1, 0))


def _launch_params(cfg: RasterConfig, n_ch: int) -> dict:
    return dict(
        C=n_ch, CP=triton.next_power_of_2(n_ch), TILE=cfg.tile_size, BLOCK_G=32, SQUARE=cfg.footprint == "square"
    )


class _RasterizeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, means2d, conics, colors, opacities, background, radii, offsets, gids, width, height, n_tx, cfg):
        f32 = [t.detach().float().contiguous() for t in (means2d, conics, colors, opacities, background)]
        m2, co, cl, op, bg = f32
        n_ch = cl.shape[1]
        n_tiles = offsets.numel() - 1
        out = torch.empty(height * width, n_ch, device=m2.device, dtype=torch.float32)
        out_t = torch.empty(height * width, device=m2.device, dtype=torch.float32)
        args = (m2, co, cl, op, radii, offsets, gids, bg)
        consts = (width, height, n_tx, cfg.alpha_max, cfg.alpha_min, cfg.t_min)
        _rasterize_fwd_kernel[(n_tiles,)](*args, out, out_t, *consts, **_launch_params(cfg, n_ch))
        ctx.save_for_backward(*args, out, out_t)
        ctx.meta = (consts, n_tiles, cfg, means2d.dtype, colors.dtype, background.dtype)
        image = out.reshape(height, width, n_ch).to(colors.dtype)
        return image, (1.0 - out_t).reshape(height, width).to(means2d.dtype)

    @staticmethod
    def backward(ctx, g_image, g_alpha):
        m2, co, cl, op, radii, offsets, gids, bg, out, out_t = ctx.saved_tensors
        consts, n_tiles, cfg, dt_m, dt_c, dt_bg = ctx.meta
        n_ch = cl.shape[1]
        g_image = torch.zeros_like(out) if g_image is None else g_image.reshape(-1, n_ch).float().contiguous()
        g_alpha = torch.zeros_like(out_t) if g_alpha is None else g_alpha.reshape(-1).float().contiguous()
        gm, gco, gcl, gop = (torch.zeros_like(t) for t in (m2, co, cl, op))
        args = (m2, co, cl, op, radii, offsets, gids, bg, out, out_t, g_image, g_alpha, gm, gco, gcl, gop)
        _rasterize_bwd_kernel[(n_tiles,)](*args, *consts, **_launch_params(cfg, n_ch))
        g_bg = (g_image * out_t[:, None]).sum(0)
        return gm.to(dt_m), gco.to(dt_m), gcl.to(dt_c), gop.to(dt_m), g_bg.to(dt_bg), *([None] * 7)


def rasterize_triton(
    means2d,
    conics,
    colors,
    opacities,
    depths,
    radii,
    width,
    height,
    background=None,
    cfg: RasterConfig = DEFAULT_RASTER,
):
    """Triton version of ``rasterize_reference`` (same arguments and outputs)."""
    _check_raster_inputs(means2d, conics, colors, opacities, depths, radii)
    bins = bin_gaussians(means2d, radii, depths, width, height, cfg.tile_size)
    if background is None:
        background = torch.zeros(colors.shape[1], device=colors.device, dtype=colors.dtype)
    return _RasterizeFn.apply(
        means2d,
        conics,
        colors,
        opacities,
        background,
        radii.to(torch.int32).contiguous(),
        bins.offsets.contiguous(),
        bins.gauss_ids.contiguous(),
        width,
        height,
        bins.n_tiles_x,
        cfg,
    )
