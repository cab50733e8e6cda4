"""Bilinear sampling in pixel coordinates (align_corners=True, border padding), the convention of the whole model."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def pixel_to_grid(coords: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Pixel coordinates (x, y) with pixel centres at integers -> grid_sample's [-1, 1] (align_corners=True)."""
    scale = coords.new_tensor([2.0 / max(width - 1, 1), 2.0 / max(height - 1, 1)])
    return coords * scale - 1.0


def sample_map(fmap: torch.Tensor, coords: torch.Tensor, mode: str = "bilinear") -> torch.Tensor:
    """Sample ``fmap`` [B, C, H, W] at pixel coordinates ``coords`` [B, ..., 2] -> [B, ..., C] (border padding)."""
    b, c, h, w = fmap.shape
    lead = coords.shape[1:-1]
    grid = pixel_to_grid(coords.reshape(b, -1, 1, 2), h, w).to(fmap.dtype)
    out = F.grid_sample(fmap, grid, mode=mode, padding_mode="border", align_corners=True)  # B C N 1
    return out[..., 0].transpose(1, 2).reshape(b, *lead, c)


def patch_offsets(radius: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """The (2r+1)^2 integer offsets (dx, dy) of a square patch; tap k = i * P + j has dx = i - r, dy = j - r.

    (x varies along the first patch axis: the official ``delta_corr`` layout, kept so official weights line up.)
    """
    r = torch.arange(-radius, radius + 1, device=device, dtype=dtype)
    dx, dy = torch.meshgrid(r, r, indexing="ij")
    return torch.stack([dx, dy], -1).reshape(-1, 2)
