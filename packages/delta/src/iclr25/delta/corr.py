"""LocoTrack-style 4D local correlation features and the Corr4D MLP."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .kernels import local_corr4d
from .sampling import patch_offsets, sample_map


def _tf_same_pad(x: torch.Tensor, k: int, s: int) -> torch.Tensor:
    """TensorFlow 'SAME' padding for a k x k stride-s conv (extra pixel after, as TF does)."""
    h, w = x.shape[-2:]
    ph = max((math.ceil(h / s) - 1) * s + k - h, 0)
    pw = max((math.ceil(w / s) - 1) * s + k - w, 0)
    return F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))


class SameConv2d(nn.Conv2d):
    """A strided conv with TensorFlow 'SAME' padding applied on the fly (official ``Conv2dSamePadding``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(_tf_same_pad(x, self.kernel_size[0], self.stride[0]))


class Corr4DMLP(nn.Module):
    """Encode a [M, P^2 (target hw), P^2 (support ij)] correlation volume into 2 * channels[-1] features.

    One conv tower (official ``cmdtop[l].conv``) is shared by the two views: view A treats the support taps (ij) as
    channels over the target patch (h, w), view B the target taps (hw) as channels over the support patch (i, j).
    Each stage: conv k3 s2, k3 s2, k2 s2 ('same' padding), GroupNorm(c/16), ReLU; then a global mean per view and
    the two views concatenated.
    """

    def __init__(self, patch: int, channels: tuple[int, int, int]):
        super().__init__()
        self.patch = patch
        self.out_dim = 2 * channels[-1]
        cins = (patch * patch, *channels[:-1])
        self.conv = nn.ModuleList(
            [
                nn.Sequential(SameConv2d(ci, co, k, stride=2), nn.GroupNorm(max(1, co // 16), co), nn.ReLU())
                for ci, co, k in zip(cins, channels, (3, 3, 2))
            ]
        )

    def forward(self, corr: torch.Tensor) -> torch.Tensor:
        m = corr.shape[0]
        p = self.patch
        a = corr.transpose(1, 2).reshape(m, p * p, p, p)  # channels = support taps, spatial = target patch
        b = corr.reshape(m, p * p, p, p)  # channels = target taps, spatial = support patch
        x = torch.cat([a, b], 0)
        for stage in self.conv:
            x = stage(x)
        x = x.mean((2, 3))
        return torch.cat([x[:m], x[m:]], 1)


LEVEL_SCALES = (2.0, 1.0, 0.5)  # H/4 track coordinates -> pyramid level (H/2, H/4, H/8) coordinates


def sample_support(fmap: torch.Tensor, coords: torch.Tensor, radius: int, level: int) -> torch.Tensor:
    """Support patch at the query for one pyramid level: fmap [B, C_l, H_l, W_l] (each row's query frame), coords
    [B, N, 2] in H/4 units -> [B, N, P^2, C_l]."""
    offsets = patch_offsets(radius, device=coords.device, dtype=coords.dtype)
    return sample_map(fmap, coords[:, :, None, :] * LEVEL_SCALES[level] + offsets)


class CorrFeatures(nn.ModuleList):
    """Per-level local 4D correlation (kernel dispatch) followed by one Corr4DMLP per level, chunked over tracks.

    A ``ModuleList`` of the per-level MLPs, so its parameters are ``<name>.<level>.conv...`` as in the official model.
    """

    def __init__(self, radius: int, channels: tuple[int, int, int], levels: int = 3):
        super().__init__([Corr4DMLP(2 * radius + 1, channels) for _ in range(levels)])
        self.radius = radius

    def forward(
        self,
        pyramid: list[torch.Tensor],
        coords: torch.Tensor,
        supports: list[torch.Tensor],
        chunk: int | None = None,
        backend: str = "auto",
    ) -> torch.Tensor:
        """pyramid[l] [B, S, H_l, W_l, C_l] channels-last, coords [B, S, N, 2] (H/4 units) -> [B, S, N, corr_dim]."""
        b, s, n, _ = coords.shape
        chunk = n if not chunk else max(1, int(chunk))
        outs = []
        for i in range(0, n, chunk):
            sl = slice(i, min(n, i + chunk))
            feats = []
            for fmap, supp, mlp, sc in zip(pyramid, supports, self, LEVEL_SCALES):
                corr = local_corr4d(fmap, coords[:, :, sl] * sc, supp[:, sl], self.radius, backend=backend)
                m = corr.shape[0] * corr.shape[1] * corr.shape[2]
                feats.append(mlp(corr.reshape(m, *corr.shape[3:])).reshape(b, s, -1, mlp.out_dim))
            outs.append(torch.cat(feats, -1))
        return torch.cat(outs, 2)
