"""Slow, obviously-correct oracles used by the tests (float64, one pixel at a time)."""

from __future__ import annotations

import math

import numpy as np
import torch

from .camera import intrinsics, look_at
from .config import RasterConfig


def composite_brute(means2d, conics, colors, opacities, depths, radii, width, height, background=None, cfg=None):
    """Sequential 3DGS compositing per pixel in float64: sort by depth, alpha = min(0.99, o exp(-sigma)), skip
    sigma < 0, alpha < 1/255 or pixel centre outside the square footprint, stop before T would drop below 1e-4."""
    cfg = cfg or RasterConfig()
    m = means2d.detach().double().cpu().numpy()
    q = conics.detach().double().cpu().numpy()
    col = colors.detach().double().cpu().numpy()
    op = opacities.detach().double().cpu().numpy()
    r = radii.detach().cpu().numpy()
    order = [i for i in np.argsort(depths.detach().cpu().numpy(), kind="stable") if r[i] > 0]
    bg = np.zeros(col.shape[1]) if background is None else background.detach().double().cpu().numpy()
    image = np.zeros((height, width, col.shape[1]))
    alpha_out = np.zeros((height, width))
    for y in range(height):
        for x in range(width):
            T = 1.0
            c = np.zeros(col.shape[1])
            for i in order:
                dx, dy = m[i, 0] - (x + 0.5), m[i, 1] - (y + 0.5)
                if abs(dx) > r[i] or abs(dy) > r[i]:
                    continue
                sigma = 0.5 * (q[i, 0] * dx * dx + q[i, 2] * dy * dy) + q[i, 1] * dx * dy
                if sigma < 0:
                    continue
                a = min(cfg.alpha_max, op[i] * np.exp(-sigma))
                if a < cfg.alpha_min:
                    continue
                test_t = T * (1.0 - a)
                if test_t < cfg.t_min:
                    break
                c += a * T * col[i]
                T = test_t
            image[y, x] = c + T * bg
            alpha_out[y, x] = 1.0 - T
    return torch.from_numpy(image), torch.from_numpy(alpha_out)


def random_scene(n=30, seed=0, dtype=torch.float64, sh_degree=None):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n, 3, generator=g, dtype=dtype) * 0.6
    means[:3] = torch.tensor([[0.0, 0.0, 4.5], [5.0, 0.0, 0.0], [0.3, -5.0, 0.8]], dtype=dtype)  # behind / off-screen
    quats = torch.randn(n, 4, generator=g, dtype=dtype)
    scales = torch.rand(n, 3, generator=g, dtype=dtype) * 0.25 + 0.05
    opac = torch.rand(n, generator=g, dtype=dtype) * 0.9 + 0.05
    if sh_degree is None:
        colors = torch.rand(n, 3, generator=g, dtype=dtype)
    else:
        colors = torch.randn(n, (sh_degree + 1) ** 2, 3, generator=g, dtype=dtype) * 0.3
    return means, quats, scales, opac, colors


def tiny_camera(width=16, height=16, dtype=torch.float64, dist=4.0):
    viewmat = look_at((0.3, -dist, 0.8), (0.0, 0.0, 0.0)).to(dtype)
    f = 0.5 * width / math.tan(math.radians(25))
    K = intrinsics(f, f * 1.05, width / 2 + 0.3, height / 2 - 0.2).to(dtype)
    return viewmat, K
