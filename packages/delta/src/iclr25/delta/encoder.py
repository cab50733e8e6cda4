"""CoTracker-style BasicEncoder returning DELTA's 3-level correlation pyramid (H/2, H/4, H/8) and H/4 features."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualBlock(nn.Module):
    """conv3x3(stride) - IN - ReLU - conv3x3 - IN - ReLU, plus a (1x1 conv + IN) shortcut when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, padding_mode="zeros")
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.norm1 = nn.InstanceNorm2d(cout)
        self.norm2 = nn.InstanceNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride), nn.InstanceNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = F.relu(self.norm2(self.conv2(y)))
        return F.relu((x if self.down is None else self.down(x)) + y)


class BasicEncoder(nn.Module):
    """Stem (7x7 s2) and four stages of two residual blocks; all stages resized to H/4 and fused to ``latent_dim``.

    ``forward(images [M, 3, H, W] in [-1, 1])`` returns ``(features [M, latent, H/4, W/4], pyramid)`` with
    ``pyramid = [stage1 (H/2), features (H/4), stage3 (H/8)]``.
    """

    def __init__(self, dims: tuple[int, int, int, int], latent_dim: int):
        super().__init__()
        d1, d2, d3, d4 = dims
        self.stem = nn.Sequential(nn.Conv2d(3, d1, 7, stride=2, padding=3), nn.InstanceNorm2d(d1), nn.ReLU())
        self.layer1 = nn.Sequential(ResidualBlock(d1, d1, 1), ResidualBlock(d1, d1, 1))
        self.layer2 = nn.Sequential(ResidualBlock(d1, d2, 2), ResidualBlock(d2, d2, 1))
        self.layer3 = nn.Sequential(ResidualBlock(d2, d3, 2), ResidualBlock(d3, d3, 1))
        self.layer4 = nn.Sequential(ResidualBlock(d3, d4, 2), ResidualBlock(d4, d4, 1))
        self.fuse = nn.Sequential(
            nn.Conv2d(d1 + d2 + d3 + d4, 2 * latent_dim, 3, padding=1),
            nn.InstanceNorm2d(2 * latent_dim),
            nn.ReLU(),
            nn.Conv2d(2 * latent_dim, latent_dim, 1),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, images: torch.Tensor):
        h4, w4 = images.shape[-2] // 4, images.shape[-1] // 4
        a = self.layer1(self.stem(images))
        b = self.layer2(a)
        c = self.layer3(b)
        d = self.layer4(c)
        size = (h4, w4)
        cat = torch.cat([F.interpolate(t, size, mode="bilinear", align_corners=True) for t in (a, b, c, d)], 1)
        feats = self.fuse(cat)
        return feats, [a, feats, c]
