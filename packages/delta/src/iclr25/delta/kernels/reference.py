"""Pure-torch references of the Triton kernels (never imports triton). They read like the paper and define the maths.

- ``corr4d_local_reference``: LocoTrack-style local 4D correlation. For every track n in frame t, the (2r+1)^2 target
  taps F_t(x_t + delta_k) are bilinearly sampled (align_corners pixel coordinates, border padding) and dotted with the
  (2r+1)^2 support vectors sampled once around the query: corr[k, j] = <F_t(x_t + delta_k), S_j> / sqrt(C).
  This materialises the [B, T, N, P^2, C] target tensor that the kernel avoids.
- ``convex_upsample_reference``: out[c, Y, X] = sum_k w[k, Y, X] * in[c, Y//f + ky - K//2, X//f + kx - K//2], zero
  outside the low-resolution map (the official unfold + nearest-upsample + weighted-sum formulation).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..sampling import patch_offsets, sample_map


def corr4d_local_reference(fmap: torch.Tensor, coords: torch.Tensor, supp: torch.Tensor, radius: int) -> torch.Tensor:
    """fmap [B, T, H, W, C] (channels last), coords [B, T, N, 2] pixel (x, y), supp [B, N, P^2, C] -> [B, T, N, P^2, P^2]."""
    b, t, h, w, c = fmap.shape
    n = coords.shape[2]
    offsets = patch_offsets(radius, device=coords.device, dtype=coords.dtype)  # P^2 x 2
    taps = coords[:, :, :, None, :] + offsets  # B T N P2 2
    fm = fmap.reshape(b * t, h, w, c).permute(0, 3, 1, 2)
    target = sample_map(fm, taps.reshape(b * t, n, -1, 2))  # BT N P2 C
    target = target.reshape(b, t, n, -1, c)
    return torch.einsum("btnkc,bnjc->btnkj", target, supp) / math.sqrt(c)


def convex_upsample_reference(x: torch.Tensor, weights: torch.Tensor, factor: int, kernel: int) -> torch.Tensor:
    """x [B, C, h, w], weights [B, K^2, h*f, w*f] -> [B, C, h*f, w*f]."""
    b, c, h, w = x.shape
    patches = F.unfold(x, kernel, padding=kernel // 2).reshape(b, c, kernel * kernel, h, w)
    patches = patches.repeat_interleave(factor, dim=3).repeat_interleave(factor, dim=4)  # nearest x f
    return (patches * weights[:, None]).sum(2)
