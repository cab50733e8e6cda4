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


def check_unit_cube(points01: torch.Tensor) -> None:
    """Raise unless ``points01`` is a floating [N, 3] tensor with every coordinate finite and in [0, 1]."""
    if not isinstance(points01, torch.Tensor):
        raise TypeError(f"hash grid: points must be a torch.Tensor, got {type(points01).__name__}")
    if points01.dim() != 2 or points01.shape[1] != 3:
        raise ValueError(f"hash grid: points must be [N, 3], got {tuple(points01.shape)}")
    if not points01.dtype.is_floating_point:
        raise TypeError(f"hash grid: points must be floating point in [0, 1], got {points01.dtype}")
    if points01.numel() == 0:
        return
    with torch.no_grad():
        p = points01.detach()
        bad_nan, below, above = torch.stack([(~torch.isfinite(p)).any(1).sum(), (p < 0).any(1).sum(),
                                             (p > 1).any(1).sum()]).tolist()  # fmt: skip
    if bad_nan:
        raise ValueError(f"hash grid: {bad_nan} of {len(p)} points are NaN or infinite")
    if below or above:
        lo, hi = float(p.min()), float(p.max())
        raise ValueError(f"hash grid: points must lie in [0, 1]^3 (contract them first), {below + above} of {len(p)} "
                         f"are outside (min {lo:.6g}, max {hi:.6g})")  # fmt: skip


def hashgrid_encode(points01: torch.Tensor, table: torch.Tensor, layout, backend: str = "auto") -> torch.Tensor:
    """Multi-resolution hash encoding of points in [0, 1]^3 (see ``hashgrid_reference``).

    Points outside [0, 1]^3 or not finite raise: the hash would silently wrap them onto unrelated cells."""
    check_unit_cube(points01)
    if resolve_backend(points01, backend) == "torch":
        return hashgrid_reference(points01, table, layout)
    from .hashgrid import hashgrid_triton

    return hashgrid_triton(points01, table, layout)
