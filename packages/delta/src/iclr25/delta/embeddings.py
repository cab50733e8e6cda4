"""Token embeddings: CoTracker's linear-frequency 2D embedding and MAE-style sin-cos position/time tables."""

from __future__ import annotations

import math

import torch


def emb2d(xy: torch.Tensor, freqs: int, cat_coords: bool = True) -> torch.Tensor:
    """[..., 2] -> [..., (2 +) 2*freqs]: ``[x, y]`` (with ``cat_coords``) first, then the x and the y embeddings,
    each sin/cos interleaved at the *linear* frequencies arange(0, F, 2) * 1000 / F.

    This is the official (CoTracker ``get_2d_embedding``) layout and quirk, not the usual geometric progression; the
    coordinates come *first*, so the official input projection's weights line up.
    """
    div = torch.arange(0, freqs, 2, device=xy.device, dtype=xy.dtype) * (1000.0 / freqs)
    parts = [xy] if cat_coords else []
    for i in range(2):
        arg = xy[..., i : i + 1] * div
        pe = torch.stack([torch.sin(arg), torch.cos(arg)], -1).flatten(-2)  # interleaved sin, cos
        parts.append(pe)
    return torch.cat(parts, -1)


def sincos_1d(dim: int, positions: torch.Tensor) -> torch.Tensor:
    """MAE sin-cos table: [len(positions), dim] = [sin(p w_i), cos(p w_i)], w_i = 10000^(-i/(dim/2))."""
    half = dim // 2
    omega = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float64) / max(half, 1)))
    arg = positions.to(torch.float64)[:, None] * omega[None]
    out = torch.cat([torch.sin(arg), torch.cos(arg)], 1)
    if out.shape[1] < dim:
        out = torch.cat([out, out.new_zeros(out.shape[0], dim - out.shape[1])], 1)
    return out


def sincos_2d_grid(dim: int, height: int, width: int) -> torch.Tensor:
    """[dim, height, width]: first half encodes x, second half y (MAE ``get_2d_sincos_pos_embed``)."""
    half = dim // 2
    ex = sincos_1d(half, torch.arange(width))  # W x half
    ey = sincos_1d(dim - half, torch.arange(height))  # H x (dim-half)
    grid = torch.cat([ex[None].expand(height, -1, -1), ey[:, None].expand(-1, width, -1)], -1)
    return grid.permute(2, 0, 1).float()


def alibi_slopes(n: int) -> list[float]:
    """Per-head ALiBi slopes for one axis group: 24^(-(i+1)/n) (n=2 gives 1/sqrt(24), 1/24 as in the official code)."""
    return [math.pow(24.0, -(i + 1) / n) for i in range(n)]
