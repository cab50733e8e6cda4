"""CoTracker-style BasicEncoder returning DELTA's 3-level correlation pyramid (H/2, H/4, H/8) and H/4 features.

Module and parameter names follow the official layout (``fnet.conv1``, ``fnet.layer1.0.conv1``, ``...downsample.0``,
``fnet.conv2``, ``fnet.conv3``) so that official state dicts load without renaming.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def _norm(kind: str, c: int) -> nn.Module:
    if kind == "instance":
        return nn.InstanceNorm2d(c)  # no affine parameters (official encoder)
    if kind == "group":
        return nn.GroupNorm(c // 8, c)  # official ResidualBlock(norm_fn="group"): planes // 8 groups
    raise ValueError(f"unknown norm {kind!r}; expected 'instance' or 'group'")


class ResidualBlock(nn.Module):
    """conv3x3(stride) - norm - ReLU - conv3x3 - norm - ReLU, plus a (1x1 conv + norm) shortcut when stride != 1."""

    def __init__(self, cin: int, cout: int, stride: int = 1, norm: str = "group"):
        super().__init__()
        if stride == 1 and cin != cout:
            raise ValueError(f"a stride-1 residual block needs cin == cout, got {cin} -> {cout}")
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.norm1 = _norm(norm, cout)
        self.norm2 = _norm(norm, cout)
        self.downsample = None
        if stride != 1:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride), _norm(norm, cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = F.relu(self.norm2(self.conv2(y)))
        return F.relu((x if self.downsample is None else self.downsample(x)) + y)


class BasicEncoder(nn.Module):
    """Stem (7x7 s2) and four stages of two residual blocks; all stages resized to H/4 and fused to ``latent_dim``.

    ``forward(images [M, 3, H, W] in [-1, 1])`` returns ``(features [M, latent, H/4, W/4], pyramid)`` with
    ``pyramid = [stage1 (H/2), features (H/4), stage3 (H/8)]``.
    """

    def __init__(self, dims: tuple[int, int, int, int], latent_dim: int):
        super().__init__()
        d1, d2, d3, d4 = dims
        self.conv1 = nn.Conv2d(3, d1, 7, stride=2, padding=3)
        self.norm1 = nn.InstanceNorm2d(d1)
        self.layer1 = nn.Sequential(ResidualBlock(d1, d1, 1, "instance"), ResidualBlock(d1, d1, 1, "instance"))
        self.layer2 = nn.Sequential(ResidualBlock(d1, d2, 2, "instance"), ResidualBlock(d2, d2, 1, "instance"))
        self.layer3 = nn.Sequential(ResidualBlock(d2, d3, 2, "instance"), ResidualBlock(d3, d3, 1, "instance"))
        self.layer4 = nn.Sequential(ResidualBlock(d3, d4, 2, "instance"), ResidualBlock(d4, d4, 1, "instance"))
        self.conv2 = nn.Conv2d(d1 + d2 + d3 + d4, 2 * latent_dim, 3, padding=1)
        self.norm2 = nn.InstanceNorm2d(2 * latent_dim)
        self.conv3 = nn.Conv2d(2 * latent_dim, latent_dim, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, images: torch.Tensor):
        h4, w4 = images.shape[-2] // 4, images.shape[-1] // 4
        a = self.layer1(F.relu(self.norm1(self.conv1(images))))
        b = self.layer2(a)
        c = self.layer3(b)
        d = self.layer4(c)
        size = (h4, w4)
        cat = torch.cat([F.interpolate(t, size, mode="bilinear", align_corners=True) for t in (a, b, c, d)], 1)
        feats = self.conv3(F.relu(self.norm2(self.conv2(cat))))
        return feats, [a, feats, c]
