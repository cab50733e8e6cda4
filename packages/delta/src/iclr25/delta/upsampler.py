"""Attention-based convex upsampler (``UpsampleTransformerAlibi``): H/4 track grid -> every full-resolution pixel.

Each full-resolution pixel (query: decoder-upsampled track feature + flow-guidance feature) attends to the 5x5
low-resolution neighbourhood of its parent cell (keys: [feature | flow feature], zero padded at the border) with an
ALiBi distance bias; a Linear + softmax turns the result into 25 convex weights that are applied by
``kernels.upsample_convex`` to displacements, depth, and visibility/confidence logits.

Memory-lean but identical maths: LayerNorm and K/V projections run at low resolution and are gathered per cell (the
zero-padded keys become the projection of LayerNorm(0) = beta, exactly as when normalising the padded unfold).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import Mlp
from .embeddings import alibi_slopes
from .encoder import ResidualBlock


def _gn(c: int) -> nn.GroupNorm:
    return nn.GroupNorm(math.gcd(16, c), c)


class DecoderUpsampler(nn.Module):
    """conv3x3-GN-ReLU, 2 x [ResidualBlock, nearest x2, conv3x3], GN-ReLU, conv3x3: [B,C,h,w] -> [B,C,4h,4w]."""

    def __init__(self, c: int):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), _gn(c), nn.ReLU())
        self.res = nn.ModuleList([ResidualBlock(c, c), ResidualBlock(c, c)])
        self.convs = nn.ModuleList([nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)])
        self.tail = nn.Sequential(_gn(c), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))

    def forward(self, x):
        x = self.head(x)
        for res, conv in zip(self.res, self.convs):
            x = conv(F.interpolate(res(x), scale_factor=2, mode="nearest"))
        return self.tail(x)


class NeighbourhoodCrossAttnBlock(nn.Module):
    """Fine queries [B, h, w, f^2, D] attend to the K x K neighbourhood of their low-resolution cell."""

    def __init__(self, dim: int, heads: int, kernel: int, mlp_ratio: float):
        super().__init__()
        self.heads, self.kernel = heads, kernel
        self.norm_q = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm_ctx = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, mlp_ratio)
        r = torch.arange(kernel) - kernel // 2
        dy, dx = torch.meshgrid(r, r, indexing="ij")
        half = heads // 2
        slopes_x = torch.tensor(alibi_slopes(half))
        slopes_y = torch.tensor(alibi_slopes(heads - half))
        bias = torch.cat(
            [-slopes_x[:, None] * dx.reshape(1, -1).abs(), -slopes_y[:, None] * dy.reshape(1, -1).abs()], 0
        )
        self.register_buffer("alibi", bias.float(), persistent=False)  # heads x K^2

    def neighbourhood_kv(self, ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ctx [B, h, w, D] -> K, V [B, h, w, K^2, D] (padding = projection of LayerNorm(0))."""
        b, h, w, d = ctx.shape
        kv = self.kv(self.norm_ctx(ctx))  # B h w 2D
        pad_kv = self.kv(self.norm_ctx(ctx.new_zeros(1, d)))[0]  # 2D
        p = self.kernel // 2
        full = pad_kv.expand(b, h + 2 * p, w + 2 * p, 2 * d).clone()
        full[:, p : p + h, p : p + w] = kv
        nb = full.unfold(1, self.kernel, 1).unfold(2, self.kernel, 1)  # B h w 2D K K
        nb = nb.permute(0, 1, 2, 4, 5, 3).reshape(b, h, w, self.kernel * self.kernel, 2 * d)
        return nb[..., :d], nb[..., d:]

    def forward(self, q: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        b, h, w, f2, d = q.shape
        k, v = self.neighbourhood_kv(ctx)
        hd = d // self.heads
        qq = self.q(self.norm_q(q)).reshape(b, h, w, f2, self.heads, hd)
        k = k.reshape(b, h, w, -1, self.heads, hd)
        v = v.reshape(b, h, w, -1, self.heads, hd)
        logits = torch.einsum("bhwqnc,bhwknc->bhwnqk", qq, k) / math.sqrt(hd) + self.alibi[:, None, :].to(q.dtype)
        out = torch.einsum("bhwnqk,bhwknc->bhwqnc", logits.softmax(-1), v).reshape(b, h, w, f2, d)
        q = q + self.proj(out)
        return q + self.mlp(self.norm2(q))


class AttentionUpsampler(nn.Module):
    """Computes convex upsampling weights [B, K^2, 4h, 4w] from frame-0 track features and the window's flow."""

    def __init__(self, cfg):
        super().__init__()
        c, fd, s = cfg.latent_dim, cfg.upsample_flow_dim, cfg.window_len
        self.factor, self.kernel = cfg.upsample_factor, cfg.upsample_kernel
        self.decoder = DecoderUpsampler(c)
        self.flow_mlp = nn.Sequential(
            nn.Conv2d(2 * s, 2 * fd, 7, padding=3), nn.ReLU(), nn.Conv2d(2 * fd, fd, 3, padding=1), nn.ReLU()
        )
        dim = c + fd
        self.blocks = nn.ModuleList(
            [
                NeighbourhoodCrossAttnBlock(dim, cfg.upsample_heads, self.kernel, cfg.mlp_ratio)
                for _ in range(cfg.upsample_blocks)
            ]
        )
        self.out = nn.Linear(dim, self.kernel * self.kernel)

    def forward(self, feat_low: torch.Tensor, flow_low: torch.Tensor) -> torch.Tensor:
        """feat_low [B, C, h, w]; flow_low [B, 2S, h, w] = (x_t - grid) / Dz for the window -> weights."""
        b, _, h, w = feat_low.shape
        f = self.factor
        flow_feat = self.flow_mlp(flow_low)
        ctx = torch.cat([feat_low, flow_feat], 1).permute(0, 2, 3, 1)  # B h w D
        fine = self.decoder(feat_low)  # B C 4h 4w
        flow_up = flow_feat.repeat_interleave(f, 2).repeat_interleave(f, 3)
        q = torch.cat([fine, flow_up], 1).permute(0, 2, 3, 1)  # B H W D
        d = q.shape[-1]
        q = q.reshape(b, h, f, w, f, d).transpose(2, 3).reshape(b, h, w, f * f, d)
        for blk in self.blocks:
            q = blk(q, ctx)
        wts = self.out(q).softmax(-1)  # B h w f2 K2
        wts = wts.reshape(b, h, w, f, f, -1).permute(0, 5, 1, 3, 2, 4)  # B K2 h f w f
        return wts.reshape(b, self.kernel * self.kernel, h * f, w * f)
