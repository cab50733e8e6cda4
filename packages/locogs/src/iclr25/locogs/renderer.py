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
    if not t.dtype.is_floating_point:
        raise TypeError(f"rasterize: {name} must be a floating-point tensor, got {t.dtype}")


def _check_size(name, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) and not (isinstance(v, torch.Tensor) and v.numel() == 1):
        raise TypeError(f"rasterize: {name} must be an int, got {type(v).__name__}")
    v = int(v)
    if v < 1:
        raise ValueError(f"rasterize: width and height must be positive, got {name}={v}")
    return v


def validate_inputs(means, quats, scales, opacities, colors, viewmat, K, width, height, background=None,
                    sh_degree=None, sh_degrees=None):  # fmt: skip
    """Check everything ``rasterize`` receives, up front, with errors that say what was wrong and what was expected.

    Shapes, floating dtypes, one device, a rigid 4x4 world-to-camera ``viewmat``, a 3x3 pinhole ``K`` (fx, fy > 0),
    a background of one value per colour channel, finite values everywhere (NaN / inf are never silently dropped),
    scales >= 0 (0 only for Gaussians with opacity 0: LocoGS's masked Gaussians), opacities in [0, 1], quaternions
    with a non-zero norm, and per-Gaussian SH degrees in [0, degree of ``colors``]. Returns (width, height)."""
    for name, t, nd in (("means", means, 2), ("quats", quats, 2), ("scales", scales, 2), ("opacities", opacities, 1),
                        ("viewmat", viewmat, 2), ("K", K, 2)):  # fmt: skip
        _check(name, t, nd)
    if not isinstance(colors, torch.Tensor):
        raise TypeError(f"rasterize: colors must be a torch.Tensor, got {type(colors).__name__}")
    if not colors.dtype.is_floating_point:
        raise TypeError(f"rasterize: colors must be a floating-point tensor, got {colors.dtype}")
    width, height = _check_size("width", width), _check_size("height", height)
    n = means.shape[0]
    for name, t, shape in (("means", means, (n, 3)), ("quats", quats, (n, 4)), ("scales", scales, (n, 3)),
                           ("opacities", opacities, (n,)), ("viewmat", viewmat, (4, 4)), ("K", K, (3, 3))):  # fmt: skip
        if tuple(t.shape) != shape:
            raise ValueError(f"rasterize: {name} must have shape {shape} (N = {n} from means), got {tuple(t.shape)}")
    if colors.dim() == 2:
        if colors.shape[0] != n:
            raise ValueError(f"rasterize: colors must be [N={n}, C], got {tuple(colors.shape)}")
        if sh_degree is not None:
            raise ValueError("rasterize: sh_degree was given but colors is [N, C] (not SH coefficients [N, K, 3])")
        if sh_degrees is not None:
            raise ValueError("rasterize: sh_degrees was given but colors is [N, C] (not SH coefficients [N, K, 3])")
    elif colors.dim() == 3:
        if colors.shape[0] != n or colors.shape[2] != 3 or colors.shape[1] not in (1, 4, 9, 16):
            raise ValueError(f"rasterize: SH colors must be [N={n}, K in (1, 4, 9, 16), 3], got {tuple(colors.shape)}")
        max_deg = int(round(colors.shape[1] ** 0.5)) - 1
        if sh_degree is not None and (isinstance(sh_degree, bool) or not 0 <= int(sh_degree) <= max_deg):
            raise ValueError(f"rasterize: sh_degree must be in 0..{max_deg} for {colors.shape[1]} SH coefficients, "
                             f"got {sh_degree}")  # fmt: skip
        if sh_degrees is not None:
            if not isinstance(sh_degrees, torch.Tensor) or tuple(sh_degrees.shape) != (n,):
                raise ValueError(f"rasterize: sh_degrees must be an integer tensor [N={n}], got "
                                 f"{tuple(getattr(sh_degrees, 'shape', ()))}")  # fmt: skip
            if sh_degrees.dtype.is_floating_point or sh_degrees.dtype == torch.bool:
                raise TypeError(f"rasterize: sh_degrees must be an integer tensor, got {sh_degrees.dtype}")
    else:
        raise ValueError(f"rasterize: colors must be [N, C] or SH [N, K, 3], got {tuple(colors.shape)}")
    dtype, device = means.dtype, means.device
    for name, t in (("quats", quats), ("scales", scales), ("opacities", opacities), ("colors", colors)):
        if t.dtype != dtype:
            raise TypeError(f"rasterize: {name} is {t.dtype} but means is {dtype}: pass one floating dtype")
    tensors = {"quats": quats, "scales": scales, "opacities": opacities, "colors": colors, "viewmat": viewmat, "K": K}
    if sh_degrees is not None:
        tensors["sh_degrees"] = sh_degrees
    if isinstance(background, torch.Tensor):
        tensors["background"] = background
    for name, t in tensors.items():
        if t.device != device:
            raise ValueError(f"rasterize: {name} is on {t.device} but means is on {device}: put every input on one "
                             "device")  # fmt: skip
    n_ch = colors.shape[-1]
    if background is not None:
        bg = torch.as_tensor(background)
        if not bg.dtype.is_floating_point and bg.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"rasterize: background must be real numbers, got {bg.dtype}")
        if tuple(bg.shape) != (n_ch,):
            raise ValueError(f"rasterize: background must have one value per colour channel ({n_ch},), got "
                             f"{tuple(bg.shape)}")  # fmt: skip
        if not bool(torch.isfinite(bg.double()).all()):
            raise ValueError(f"rasterize: background must be finite, got {bg.tolist()}")
    # value checks: one device-to-host transfer for all of them
    with torch.no_grad():
        qn = quats.norm(dim=-1)
        checks = [
            ("means has NaN/inf", ~torch.isfinite(means).all(dim=1)),
            ("quats has NaN/inf", ~torch.isfinite(quats).all(dim=1)),
            ("scales has NaN/inf", ~torch.isfinite(scales).all(dim=1)),
            ("opacities has NaN/inf", ~torch.isfinite(opacities)),
            ("colors has NaN/inf", ~torch.isfinite(colors.flatten(1)).all(dim=1)),
            ("quats has zero norm (cannot be normalised to a rotation)", torch.isfinite(qn) & (qn <= 1e-12)),
            ("scales has negative entries (standard deviations must be >= 0)", (scales < 0).any(dim=1)),
            ("scales has zeros on a Gaussian with opacity > 0 (only masked, opacity-0 Gaussians may have scale 0)",
             (scales == 0).any(dim=1) & (opacities > 0)),
            ("opacities outside [0, 1]", (opacities < 0) | (opacities > 1)),
        ]  # fmt: skip
        if sh_degrees is not None:
            max_deg = int(round(colors.shape[1] ** 0.5)) - 1
            checks.append((f"sh_degrees outside [0, {max_deg}]", (sh_degrees < 0) | (sh_degrees > max_deg)))
        counts = torch.stack([c.sum() for _, c in checks]).tolist()
        vm, kk = viewmat.detach().double().cpu(), K.detach().double().cpu()
    for (msg, _), cnt in zip(checks, counts):
        if cnt:
            raise ValueError(f"rasterize: {msg}: {cnt} of {n} Gaussians")
    if not bool(torch.isfinite(vm).all()) or not bool(torch.isfinite(kk).all()):
        raise ValueError("rasterize: viewmat and K must be finite")
    if not torch.allclose(vm[3], torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64)):
        raise ValueError(
            f"rasterize: viewmat must be a 4x4 world-to-camera [R t; 0 0 0 1], last row is {vm[3].tolist()}"
        )
    R = vm[:3, :3]
    if (R @ R.T - torch.eye(3, dtype=torch.float64)).abs().max() > 1e-4 or torch.linalg.det(R) < 0:
        raise ValueError("rasterize: viewmat's 3x3 block must be a rotation (orthonormal, det +1)")
    if kk[0, 0] <= 0 or kk[1, 1] <= 0 or not torch.allclose(kk[2], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)):
        raise ValueError(
            f"rasterize: K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] with fx, fy > 0, got {kk.tolist()}"
        )
    return width, height


def rasterize_full(
    means, quats, scales, opacities, colors, viewmat, K, width, height,
    background=None, sh_degree=None, backend="auto", sh_degrees=None, cfg: RasterConfig = DEFAULT_RASTER,
) -> RenderOutput:  # fmt: skip
    """``rasterize`` returning the projection too (for densification statistics)."""
    if not isinstance(cfg, RasterConfig):
        raise TypeError(f"rasterize: cfg must be a RasterConfig, got {type(cfg).__name__}")
    width, height = validate_inputs(means, quats, scales, opacities, colors, viewmat, K, width, height, background,
                                    sh_degree, sh_degrees)  # fmt: skip
    proj = project_gaussians(means, quats, scales, viewmat, K, int(width), int(height), cfg)
    if colors.dim() == 2:
        rgb = colors
    else:
        campos = -(viewmat[:3, :3].T @ viewmat[:3, 3]).to(means.dtype)
        rgb = sh_to_rgb(colors, means - campos, sh_degree, sh_degrees)
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
    cfg: RasterConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Render Gaussians: means [N,3], quats [N,4] (wxyz), scales [N,3], opacities [N], colors [N,3] or SH
    [N,(d+1)^2,3]; viewmat [4,4] world-to-camera, K [3,3]. Returns image [H,W,3] and alpha [H,W].

    ``sh_degrees`` (extra to gsplat): per-Gaussian SH degree [N]; higher bands are skipped for that Gaussian.
    ``cfg``: rasterizer constants, e.g. ``RasterConfig(footprint="tile")`` to evaluate every pixel of each 16x16
    tile a Gaussian's square touches, as graphdeco and gsplat do (default: only the pixels inside the square)."""
    out = rasterize_full(
        means,
        quats,
        scales,
        opacities,
        colors,
        viewmat,
        K,
        width,
        height,
        background,
        sh_degree,
        backend,
        sh_degrees,
        DEFAULT_RASTER if cfg is None else cfg,
    )
    return out.image, out.alpha


def render(
    gaussians: GaussianSet, camera: Camera, background=None, sh_degree=None, backend="auto",
    cfg: RasterConfig | None = None,
) -> RenderOutput:  # fmt: skip
    """Render a ``GaussianSet`` from a ``Camera`` (per-Gaussian SH degrees honoured; ``cfg`` as in ``rasterize``)."""
    dev = gaussians.means.device
    return rasterize_full(
        gaussians.means, gaussians.quats, gaussians.scales, gaussians.opacities, gaussians.sh,
        camera.viewmat.to(dev), camera.K.to(dev), camera.width, camera.height, background, sh_degree, backend,
        gaussians.sh_degrees, DEFAULT_RASTER if cfg is None else cfg,
    )  # fmt: skip
