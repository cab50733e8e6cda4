"""The public rasterizer: projection + SH colour + tile compositing, in the gsplat ``rasterization`` conventions."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .camera import Camera
from .config import DEFAULT_RASTER, RasterConfig
from .gaussians import GaussianSet
from .kernels import rasterize_pixels
from .projection import Projected, project_gaussians
from .sh import sh_to_rgb


@dataclass
class RenderOutput:
    image: torch.Tensor  # [H, W, 3]
    alpha: torch.Tensor  # [H, W]
    projected: Projected  # means2d keeps its graph: call .retain_grad() before backward for densification stats


def _check(name, t, ndim):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"rasterize: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"rasterize: {name} must have {ndim} dims, got shape {tuple(t.shape)}")


def rasterize_full(
    means, quats, scales, opacities, colors, viewmat, K, width, height,
    background=None, sh_degree=None, backend="auto", sh_degrees=None, cfg: RasterConfig = DEFAULT_RASTER,
) -> RenderOutput:  # fmt: skip
    """``rasterize`` returning the projection too (for densification statistics)."""
    for name, t, nd in (("means", means, 2), ("quats", quats, 2), ("scales", scales, 2), ("opacities", opacities, 1)):
        _check(name, t, nd)
    _check("viewmat", viewmat, 2)
    _check("K", K, 2)
    if int(width) < 1 or int(height) < 1:
        raise ValueError(f"rasterize: width and height must be positive, got {width}x{height}")
    proj = project_gaussians(means, quats, scales, viewmat, K, int(width), int(height), cfg)
    if colors.dim() == 2:
        if sh_degree is not None:
            raise ValueError("rasterize: sh_degree was given but colors is [N, C] (not SH coefficients [N, K, 3])")
        rgb = colors
    elif colors.dim() == 3:
        campos = -(viewmat[:3, :3].T @ viewmat[:3, 3]).to(means.dtype)
        rgb = sh_to_rgb(colors, means - campos, sh_degree, sh_degrees)
    else:
        raise ValueError(f"rasterize: colors must be [N, C] or SH [N, K, 3], got {tuple(colors.shape)}")
    if background is not None:
        background = torch.as_tensor(background, dtype=rgb.dtype, device=rgb.device)
    image, alpha = rasterize_pixels(
        proj.means2d, proj.conics, rgb, opacities, proj.depths, proj.radii, int(width), int(height), background,
        cfg, backend,
    )  # fmt: skip
    return RenderOutput(image, alpha, proj)


def rasterize(
    means: torch.Tensor,
    quats: torch.Tensor,
    scales: torch.Tensor,
    opacities: torch.Tensor,
    colors: torch.Tensor,
    viewmat: torch.Tensor,
    K: torch.Tensor,
    width: int,
    height: int,
    background: torch.Tensor | None = None,
    sh_degree: int | None = None,
    backend: str = "auto",
    sh_degrees: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Render Gaussians: means [N,3], quats [N,4] (wxyz), scales [N,3], opacities [N], colors [N,3] or SH
    [N,(d+1)^2,3]; viewmat [4,4] world-to-camera, K [3,3]. Returns image [H,W,3] and alpha [H,W].

    ``sh_degrees`` (extra to gsplat): per-Gaussian SH degree [N]; higher bands are skipped for that Gaussian."""
    out = rasterize_full(
        means, quats, scales, opacities, colors, viewmat, K, width, height, background, sh_degree, backend, sh_degrees
    )
    return out.image, out.alpha


def render(gaussians: GaussianSet, camera: Camera, background=None, sh_degree=None, backend="auto") -> RenderOutput:
    """Render a ``GaussianSet`` from a ``Camera`` (per-Gaussian SH degrees honoured)."""
    dev = gaussians.means.device
    return rasterize_full(
        gaussians.means, gaussians.quats, gaussians.scales, gaussians.opacities, gaussians.sh,
        camera.viewmat.to(dev), camera.K.to(dev), camera.width, camera.height, background, sh_degree, backend,
        gaussians.sh_degrees,
    )  # fmt: skip
