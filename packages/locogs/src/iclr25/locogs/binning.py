"""Tile binning and depth sorting (the 3DGS duplicate-with-keys step, in torch)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TileBins:
    tile_size: int
    n_tiles_x: int
    n_tiles_y: int
    gauss_ids: torch.Tensor  # [M] int64 Gaussian index of each (tile, Gaussian) pair, sorted by (tile, depth)
    tile_ids: torch.Tensor  # [M] int64 tile index of each pair
    offsets: torch.Tensor  # [n_tiles + 1] int64: pairs of tile t are gauss_ids[offsets[t]:offsets[t + 1]]

    @property
    def n_tiles(self) -> int:
        return self.n_tiles_x * self.n_tiles_y


def bin_gaussians(
    means2d: torch.Tensor, radii: torch.Tensor, depths: torch.Tensor, width: int, height: int, tile_size: int
) -> TileBins:
    """Every (tile, Gaussian) pair whose square footprint [u - r, u + r] x [v - r, v + r] touches the tile, sorted by
    tile then by depth (front to back); Gaussians with radius 0 are culled."""
    with torch.no_grad():
        device = means2d.device
        ntx, nty = -(-width // tile_size), -(-height // tile_size)
        vis = torch.nonzero(radii > 0).squeeze(1)
        u, v = means2d[vis, 0].double(), means2d[vis, 1].double()
        r = radii[vis].double()
        x0 = torch.floor((u - r) / tile_size).clamp(0, ntx).long()
        x1 = torch.ceil((u + r) / tile_size).clamp(0, ntx).long()
        y0 = torch.floor((v - r) / tile_size).clamp(0, nty).long()
        y1 = torch.ceil((v + r) / tile_size).clamp(0, nty).long()
        w = (x1 - x0).clamp_min(0)
        counts = w * (y1 - y0).clamp_min(0)
        total = int(counts.sum())
        owner = torch.repeat_interleave(torch.arange(vis.numel(), device=device), counts)
        first = torch.cumsum(counts, 0) - counts
        local = torch.arange(total, device=device) - first[owner]
        wo = w[owner].clamp_min(1)
        tx = x0[owner] + local % wo
        ty = y0[owner] + local // wo
        tile = ty * ntx + tx
        # depth rank of each visible Gaussian, then one sort on (tile, rank)
        rank = torch.empty_like(vis)
        rank[torch.argsort(depths[vis].detach(), stable=True)] = torch.arange(vis.numel(), device=device)
        key = tile * max(vis.numel(), 1) + rank[owner]
        order = torch.argsort(key, stable=True)
        tile = tile[order]
        gauss = vis[owner[order]]
        offsets = torch.zeros(ntx * nty + 1, dtype=torch.long, device=device)
        offsets[1:] = torch.cumsum(torch.bincount(tile, minlength=ntx * nty), 0)
    return TileBins(tile_size, ntx, nty, gauss, tile, offsets)
