"""Kernel dispatch: ``backend="auto"`` runs Triton on CUDA tensors and the torch reference on CPU.

Triton modules are imported lazily, only when the Triton backend is chosen (the interpreter flag must be set before
they are imported).
"""

from __future__ import annotations

import torch

from iclr25.shared import resolve_backend

from ..config import DEFAULT_RASTER, RasterConfig
from .reference import hashgrid_reference, rasterize_reference

__all__ = ["rasterize_pixels", "hashgrid_encode", "rasterize_reference", "hashgrid_reference"]


def rasterize_pixels(
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
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Composite projected Gaussians into an image [H, W, C] and alpha [H, W] (see ``rasterize_reference``)."""
    if resolve_backend(means2d, backend) == "torch":
        return rasterize_reference(means2d, conics, colors, opacities, depths, radii, width, height, background, cfg)
    from .rasterize import rasterize_triton

    return rasterize_triton(means2d, conics, colors, opacities, depths, radii, width, height, background, cfg)


def hashgrid_encode(points01: torch.Tensor, table: torch.Tensor, layout, backend: str = "auto") -> torch.Tensor:
    """Multi-resolution hash encoding of points in [0, 1]^3 (see ``hashgrid_reference``)."""
    if resolve_backend(points01, backend) == "torch":
        return hashgrid_reference(points01, table, layout)
    from .hashgrid import hashgrid_triton

    return hashgrid_triton(points01, table, layout)
