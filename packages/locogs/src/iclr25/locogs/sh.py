"""Real spherical harmonics up to degree 3 (the graphdeco 3DGS basis and sign convention)."""

from __future__ import annotations

import torch

C0 = 0.28209479177387814
C1 = 0.4886025119029199
C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)


def num_sh_bases(degree: int) -> int:
    if not 0 <= degree <= 3:
        raise ValueError(f"SH degree must be in 0..3, got {degree}")
    return (degree + 1) ** 2


def sh_degree_from_bases(k: int) -> int:
    for d in range(4):
        if (d + 1) ** 2 == k:
            return d
    raise ValueError(f"SH coefficient count must be 1, 4, 9 or 16, got {k}")


def sh_basis(dirs: torch.Tensor, degree: int) -> torch.Tensor:
    """Basis values [N, (degree+1)^2] at unit directions ``dirs`` [N, 3]."""
    x, y, z = dirs.unbind(-1)
    out = [torch.full_like(x, C0)]
    if degree >= 1:
        out += [-C1 * y, C1 * z, -C1 * x]
    if degree >= 2:
        xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
        out += [C2[0] * xy, C2[1] * yz, C2[2] * (2 * zz - xx - yy), C2[3] * xz, C2[4] * (xx - yy)]
    if degree >= 3:
        out += [
            C3[0] * y * (3 * xx - yy),
            C3[1] * xy * z,
            C3[2] * y * (4 * zz - xx - yy),
            C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
            C3[4] * x * (4 * zz - xx - yy),
            C3[5] * z * (xx - yy),
            C3[6] * x * (xx - 3 * yy),
        ]
    return torch.stack(out, dim=-1)


def band_of_coefficient(k: int) -> int:
    """The SH band l of coefficient index k (k in [l^2, (l+1)^2))."""
    return int(k**0.5)


def eval_sh(
    coeffs: torch.Tensor, dirs: torch.Tensor, degree: int | None = None, sh_degrees: torch.Tensor | None = None
) -> torch.Tensor:
    """Evaluate SH colour ``sum_k basis_k(dir) * coeffs[:, k]`` (no +0.5 offset).

    coeffs [N, K, 3]; dirs [N, 3] (normalised here); degree: highest band used (default: all of K);
    sh_degrees: optional per-Gaussian int [N], bands above ``sh_degrees[i]`` are skipped for Gaussian i
    (LocoGS's adaptive SH bandwidth, the ``sh_levels`` of its rasterizer fork).
    """
    if coeffs.dim() != 3 or coeffs.shape[-1] != 3:
        raise ValueError(f"SH coeffs must be [N, K, 3], got {tuple(coeffs.shape)}")
    max_deg = sh_degree_from_bases(coeffs.shape[1])
    degree = max_deg if degree is None else int(degree)
    if degree > max_deg or degree < 0:
        raise ValueError(f"sh_degree {degree} needs {(degree + 1) ** 2} coefficients, have {coeffs.shape[1]}")
    k = (degree + 1) ** 2
    dirs = dirs / dirs.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    if sh_degrees is None:
        return (sh_basis(dirs, degree)[..., None] * coeffs[:, :k]).sum(dim=1)
    sh_degrees = torch.as_tensor(sh_degrees, device=coeffs.device)
    if sh_degrees.shape != (coeffs.shape[0],):
        raise ValueError(f"sh_degrees must be [N]={coeffs.shape[0]}, got {tuple(sh_degrees.shape)}")
    if sh_degrees.dtype.is_floating_point or sh_degrees.dtype == torch.bool:
        raise TypeError(f"sh_degrees must be an integer tensor, got {sh_degrees.dtype}")
    if sh_degrees.numel() and (int(sh_degrees.min()) < 0 or int(sh_degrees.max()) > max_deg):
        raise ValueError(
            f"sh_degrees must lie in [0, {max_deg}], got [{int(sh_degrees.min())}, {int(sh_degrees.max())}]"
        )
    # adaptive bandwidth: each group of Gaussians evaluates (and reads) only its active bands
    eff = sh_degrees.clamp(max=degree)
    out = coeffs.new_zeros(coeffs.shape[0], 3)
    for d in range(degree + 1):
        idx = torch.nonzero(eff == d).squeeze(1)
        if idx.numel():
            kd = (d + 1) ** 2
            part = (sh_basis(dirs[idx], d)[..., None] * coeffs[idx, :kd]).sum(dim=1)
            out = out.index_copy(0, idx, part)
    return out


def sh_to_rgb(coeffs, dirs, degree=None, sh_degrees=None) -> torch.Tensor:
    """3DGS colour: SH + 0.5, clamped at 0 (graphdeco computeColorFromSH)."""
    return (eval_sh(coeffs, dirs, degree, sh_degrees) + 0.5).clamp_min(0.0)


def rgb_to_sh(rgb: torch.Tensor) -> torch.Tensor:
    return (rgb - 0.5) / C0
