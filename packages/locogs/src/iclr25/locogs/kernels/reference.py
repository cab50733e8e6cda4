"""Pure-torch references of the Triton kernels. Never imports triton; written to read like the paper.

- ``rasterize_reference``: front-to-back alpha compositing of projected Gaussians (3DGS), sparse formulation with
  autograd; the reference of ``kernels/rasterize.py`` and the CPU default.
- ``hashgrid_reference``: the tiny-cuda-nn multi-resolution hash encoding; the reference of ``kernels/hashgrid.py``.
"""

from __future__ import annotations

import torch

from ..binning import bin_gaussians
from ..config import DEFAULT_RASTER, RasterConfig


def _check_raster_inputs(means2d, conics, colors, opacities, depths, radii):
    n = means2d.shape[0]
    shapes = {
        "means2d": (means2d, (n, 2)),
        "conics": (conics, (n, 3)),
        "opacities": (opacities, (n,)),
        "depths": (depths, (n,)),
        "radii": (radii, (n,)),
    }
    for name, (t, shape) in shapes.items():
        if tuple(t.shape) != shape:
            raise ValueError(f"rasterize: {name} must have shape {shape}, got {tuple(t.shape)}")
    if colors.dim() != 2 or colors.shape[0] != n:
        raise ValueError(f"rasterize: colors must be [N={n}, C], got {tuple(colors.shape)}")


def rasterize_reference(
    means2d: torch.Tensor,
    conics: torch.Tensor,
    colors: torch.Tensor,
    opacities: torch.Tensor,
    depths: torch.Tensor,
    radii: torch.Tensor,
    width: int,
    height: int,
    background: torch.Tensor | None = None,
    cfg: RasterConfig = DEFAULT_RASTER,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Composite Gaussians front to back: C = sum_i c_i a_i T_i + T_final * bg with T_i = prod_{j<i} (1 - a_j).

    a_i = min(0.99, o_i exp(-sigma)), sigma = 0.5 (a dx^2 + c dy^2) + b dx dy, skipped when sigma < 0 or a_i < 1/255
    or the pixel centre lies outside the Gaussian's square footprint |dx|, |dy| <= radius; a pixel stops before the
    first Gaussian that would bring T below 1e-4. Returns image [H, W, C] and alpha = 1 - T_final [H, W].

    Sparse evaluation: candidate (Gaussian, pixel) pairs come from 4-px bins; alpha is first evaluated without
    autograd to drop negligible pairs, then recomputed with autograd on the survivors, sorted by (pixel, depth);
    transmittance is a segmented cumulative sum of log(1 - a) in float64.
    """
    _check_raster_inputs(means2d, conics, colors, opacities, depths, radii)
    device, dtype = means2d.device, means2d.dtype
    n_ch = colors.shape[1]
    n_pix = width * height
    gid, px, py, pix = _sorted_pairs(means2d, conics, opacities, depths, radii, width, height, cfg)
    alpha, _, _, _ = _alpha(means2d, conics, opacities, gid, px, py, cfg)
    log1m = torch.log1p(-alpha.double())
    with torch.no_grad():
        first = torch.ones_like(pix, dtype=torch.bool)
        first[1:] = pix[1:] != pix[:-1]
        seg_start = torch.cummax(torch.where(first, torch.arange(pix.numel(), device=device), 0), 0).values
    incl = torch.cumsum(log1m, 0)
    excl = incl - log1m
    log_t = excl - excl[seg_start]  # log T_i, exclusive within the pixel
    with torch.no_grad():
        alive = (log_t + log1m) >= torch.log(torch.tensor(cfg.t_min, dtype=torch.float64))
    weights = (alpha * torch.exp(log_t).to(dtype)) * alive
    image = torch.zeros(n_pix, n_ch, device=device, dtype=dtype).index_add(0, pix, weights[:, None] * colors[gid])
    log_tfinal = torch.zeros(n_pix, device=device, dtype=torch.float64).index_add(0, pix, log1m * alive)
    t_final = torch.exp(log_tfinal).to(dtype)
    if background is not None:
        image = image + t_final[:, None] * background.to(dtype)[None, :]
    return image.reshape(height, width, n_ch), (1.0 - t_final).reshape(height, width)


def _sorted_pairs(means2d, conics, opacities, depths, radii, width, height, cfg):
    """Candidate (Gaussian, pixel) pairs with alpha >= 1/255 inside the footprint, in (pixel, depth) order."""
    bs = cfg.bin_size if cfg.footprint == "square" else cfg.tile_size  # whole tiles: bin by the tiles themselves
    bins = bin_gaussians(means2d, radii, depths, width, height, bs)
    with torch.no_grad():
        # expand each (bin, Gaussian) pair to the bs x bs pixels of the bin
        loc = torch.arange(bs * bs, device=means2d.device)
        bx = (bins.tile_ids % bins.n_tiles_x)[:, None] * bs + loc % bs
        by = (bins.tile_ids // bins.n_tiles_x)[:, None] * bs + loc // bs
        gid = bins.gauss_ids[:, None].expand_as(bx)
        ok = (bx < width) & (by < height)
        gid, px, py = gid[ok], bx[ok], by[ok]
        alpha0, sigma0, dx0, dy0 = _alpha(means2d, conics, opacities, gid, px, py, cfg)
        keep = (sigma0 >= 0) & (alpha0 >= cfg.alpha_min) & _in_footprint(means2d, radii, gid, px, py, dx0, dy0, cfg)
        gid, px, py = gid[keep], px[keep], py[keep]
        pix = py * width + px
        order = torch.argsort(pix, stable=True)  # pairs were in (bin, depth) order: now (pixel, depth)
        return gid[order], px[order], py[order], pix[order]


def _in_footprint(means2d, radii, gid, px, py, dx, dy, cfg):
    """Square footprint |dx|, |dy| <= radius (default) or, with ``cfg.footprint == "tile"``, every pixel of the
    ``cfg.tile_size`` tiles that the square touches (graphdeco / gsplat)."""
    r = radii[gid].to(means2d.dtype)
    if cfg.footprint == "square":
        return (dx.abs() <= r) & (dy.abs() <= r)
    ts = cfg.tile_size
    u, v = means2d[gid, 0], means2d[gid, 1]
    # graphdeco getRect: tiles [floor((u - r) / ts), ceil((u + r) / ts)) (clamped to the grid, implicitly here)
    tx0, tx1 = torch.floor((u - r) / ts), torch.ceil((u + r) / ts)
    ty0, ty1 = torch.floor((v - r) / ts), torch.ceil((v + r) / ts)
    tx, ty = torch.div(px, ts, rounding_mode="floor"), torch.div(py, ts, rounding_mode="floor")
    return (tx >= tx0) & (tx < tx1) & (ty >= ty0) & (ty < ty1)


@torch.no_grad()
def contributing_pairs(means2d, conics, opacities, depths, radii, width, height, cfg: RasterConfig = DEFAULT_RASTER):
    """Number of (pixel, Gaussian) pairs that the compositor blends (alpha >= 1/255, before early termination): the
    work a render does, independent of timing noise."""
    gid, px, py, pix = _sorted_pairs(means2d, conics, opacities, depths, radii, width, height, cfg)
    if pix.numel() == 0:
        return 0
    alpha, _, _, _ = _alpha(means2d, conics, opacities, gid, px, py, cfg)
    log1m = torch.log1p(-alpha.double())
    first = torch.ones_like(pix, dtype=torch.bool)
    first[1:] = pix[1:] != pix[:-1]
    seg_start = torch.cummax(torch.where(first, torch.arange(pix.numel(), device=pix.device), 0), 0).values
    incl = torch.cumsum(log1m, 0)
    excl = incl - log1m
    log_t = excl - excl[seg_start]
    alive = (log_t + log1m) >= torch.log(torch.tensor(cfg.t_min, dtype=torch.float64))
    return int(alive.sum())


def _alpha(means2d, conics, opacities, gid, px, py, cfg):
    dx = means2d[gid, 0] - (px.to(means2d.dtype) + 0.5)
    dy = means2d[gid, 1] - (py.to(means2d.dtype) + 0.5)
    a, b, c = conics[gid].unbind(-1)
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    alpha = torch.clamp(opacities[gid] * torch.exp(-sigma), max=cfg.alpha_max)
    return alpha, sigma, dx, dy


HASH_PRIMES = (1, 2654435761, 805459861)  # tiny-cuda-nn coherent_prime_hash
CORNERS = ((0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 0, 1), (1, 0, 1), (0, 1, 1), (1, 1, 1))


def hashgrid_reference(points01: torch.Tensor, table: torch.Tensor, layout) -> torch.Tensor:
    """tiny-cuda-nn multi-resolution hash encoding (HashGrid, linear interpolation) of points [N, 3] in [0, 1]^3.

    Level l: pos = p * s_l + 0.5, cell = floor(pos), frac = pos - cell; each of the 8 cell corners is indexed densely
    (x + y r + z r^2) when r^3 fits the level, otherwise by (x * 1 xor y * 2654435761 xor z * 805459861) mod 2^32,
    then mod the level size; features are trilinearly weighted. ``table`` is [n_entries, F] (level-major rows);
    output [N, L * F] (level-major). No gradient reaches the points (LocoGS feeds detached positions).
    """
    if points01.dim() != 2 or points01.shape[1] != 3:
        raise ValueError(f"hash grid: points must be [N, 3], got {tuple(points01.shape)}")
    lv = layout.level_tensors(points01.device)
    idx, w = hashgrid_corners(points01.detach().float(), lv)  # [N, L, 8]
    out = (w[..., None].to(table.dtype) * table[idx]).sum(dim=2)  # [N, L, F]
    return out.reshape(points01.shape[0], layout.n_levels * table.shape[1])


def hashgrid_corners(p: torch.Tensor, lv: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Table rows [N, L, 8] and trilinear weights [N, L, 8] of the 8 cell corners at every level."""
    pos = p[:, None, :] * lv["scale"][None, :, None] + 0.5  # [N, L, 3]
    cell = torch.floor(pos)
    frac = (pos - cell)[:, :, None, :]  # [N, L, 1, 3]
    corners = torch.tensor(CORNERS, device=p.device)  # [8, 3]
    g = cell.long()[:, :, None, :] + corners  # [N, L, 8, 3]
    w = torch.prod(torch.where(corners.bool(), frac, 1.0 - frac), dim=-1)  # [N, L, 8]
    res = lv["resolution"][None, :, None]
    idx_dense = g[..., 0] + g[..., 1] * res + g[..., 2] * res * res
    idx_hash = ((g[..., 0] * HASH_PRIMES[0]) ^ (g[..., 1] * HASH_PRIMES[1]) ^ (g[..., 2] * HASH_PRIMES[2])) & 0xFFFFFFFF
    idx = torch.where(lv["dense"][None, :, None], idx_dense, idx_hash) % lv["size"][None, :, None]
    return idx + lv["offset"][None, :, None], w
