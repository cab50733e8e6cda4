"""Projection of 3D Gaussians to the image plane (EWA splatting as in 3DGS, gsplat conventions)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import DEFAULT_RASTER, RasterConfig


@dataclass
class Projected:
    means2d: torch.Tensor  # [N, 2] pixels (centre of pixel (u, v) at (u + 0.5, v + 0.5))
    conics: torch.Tensor  # [N, 3] inverse 2D covariance (a, b, c): [[a, b], [b, c]]
    depths: torch.Tensor  # [N] camera-space z
    radii: torch.Tensor  # [N] int, 0 = culled


def quat_to_rotmat(quats: torch.Tensor) -> torch.Tensor:
    """Rotation matrices [N, 3, 3] from quaternions [N, 4] in (w, x, y, z) order (normalised here)."""
    q = quats / quats.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(-1, 3, 3)


def covariance_3d(quats: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Sigma = R S S^T R^T, [N, 3, 3]."""
    M = quat_to_rotmat(quats) * scales[:, None, :]
    return M @ M.transpose(1, 2)


def project_gaussians(
    means: torch.Tensor,
    quats: torch.Tensor,
    scales: torch.Tensor,
    viewmat: torch.Tensor,
    K: torch.Tensor,
    width: int,
    height: int,
    cfg: RasterConfig = DEFAULT_RASTER,
) -> Projected:
    """Project Gaussians: Jacobian clamp (gsplat), eps2d dilation, 3-sigma radius, near-plane and off-screen cull."""
    R, t = viewmat[:3, :3].to(means.dtype), viewmat[:3, 3].to(means.dtype)
    K = K.to(means.dtype)
    mc = means @ R.T + t
    cov_c = R @ covariance_3d(quats, scales) @ R.T
    tx, ty, tz = mc.unbind(-1)
    in_front = tz > cfg.near_plane
    z = torch.where(in_front, tz, torch.ones_like(tz))  # safe depth for culled Gaussians (no inf in autograd)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    tan_fovx, tan_fovy = 0.5 * width / fx, 0.5 * height / fy
    lim_xp, lim_xn = (width - cx) / fx + 0.3 * tan_fovx, cx / fx + 0.3 * tan_fovx
    lim_yp, lim_yn = (height - cy) / fy + 0.3 * tan_fovy, cy / fy + 0.3 * tan_fovy
    txc = z * torch.clamp(tx / z, min=-lim_xn, max=lim_xp)
    tyc = z * torch.clamp(ty / z, min=-lim_yn, max=lim_yp)
    zeros = torch.zeros_like(z)
    J = torch.stack(
        [fx / z, zeros, -fx * txc / (z * z), zeros, fy / z, -fy * tyc / (z * z)],
        dim=-1,
    ).reshape(-1, 2, 3)
    cov2d = J @ cov_c @ J.transpose(1, 2)
    a = cov2d[:, 0, 0] + cfg.eps2d
    b = 0.5 * (cov2d[:, 0, 1] + cov2d[:, 1, 0])
    c = cov2d[:, 1, 1] + cfg.eps2d
    det = a * c - b * b
    ok = in_front & (det > 0)
    det_safe = torch.where(ok, det, torch.ones_like(det))
    conics = torch.stack([c / det_safe, -b / det_safe, a / det_safe], dim=-1)
    means2d = torch.stack([fx * tx / z + cx, fy * ty / z + cy], dim=-1)
    with torch.no_grad():
        mid = 0.5 * (a + c)
        lam = mid + torch.sqrt(torch.clamp(mid * mid - det, min=0.1))
        radii = torch.ceil(cfg.sigma_radius * torch.sqrt(lam.clamp_min(0)))
        u, v = means2d[:, 0], means2d[:, 1]
        on_screen = (u + radii > 0) & (u - radii < width) & (v + radii > 0) & (v - radii < height)
        radii = torch.where(ok & on_screen, radii, torch.zeros_like(radii)).to(torch.int32)
    return Projected(means2d, conics, tz, radii)
