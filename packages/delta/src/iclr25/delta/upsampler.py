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

NEAREST_INIT_LOGIT = 12.0  # zero_init_head: centre-tap logit; softmax weight 1 - 24 e^-12 ~ 1 - 1.5e-4


class _UpsampleConv(nn.Module):
    """Nearest x2 then conv3x3 (official ``Upsample(with_conv=True)``)."""

    def __init__(self, c: int):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2, mode="nearest"))


class DecoderUpsampler(nn.Module):
    """conv3x3-GN-ReLU, 2 x [ResidualBlock (GroupNorm), nearest x2 + conv3x3], GN-ReLU, conv3x3: x4 upsampling.

    Names follow the official ``attnup_feat_cnn``: conv_in, norm1, res_blocks, upsample_blocks, norm2, conv_out. The
    GroupNorms have c // 8 groups (eps 1e-6 on norm1/norm2, as in the official module).
    """

    def __init__(self, c: int):
        super().__init__()
        self.conv_in = nn.Conv2d(c, c, 3, padding=1)
        self.norm1 = nn.GroupNorm(c // 8, c, eps=1e-6)
        self.res_blocks = nn.ModuleList([ResidualBlock(c, c, 1, "group"), ResidualBlock(c, c, 1, "group")])
        self.upsample_blocks = nn.ModuleList([_UpsampleConv(c), _UpsampleConv(c)])
        self.norm2 = nn.GroupNorm(c // 8, c, eps=1e-6)
        self.conv_out = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.norm1(self.conv_in(x)))
        for res, up in zip(self.res_blocks, self.upsample_blocks):
            x = up(res(x))
        return self.conv_out(F.relu(self.norm2(x)))


class NeighbourhoodAttention(nn.Module):
    """Separate biased q/k/v/output projections (official ``RelativeAttention``)."""

    def __init__(self, dim: int):
        super().__init__()
        self.query_proj = nn.Linear(dim, dim)
        self.key_proj = nn.Linear(dim, dim)
        self.value_proj = nn.Linear(dim, dim)
        self.final_proj = nn.Linear(dim, dim)


class NeighbourhoodCrossAttnBlock(nn.Module):
    """Fine queries [B, h, w, f^2, D] attend to the K x K neighbourhood of their low-resolution cell."""

    def __init__(self, dim: int, heads: int, kernel: int, mlp_ratio: float):
        super().__init__()
        self.heads, self.kernel = heads, kernel
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm_context = nn.LayerNorm(dim)
        self.cross_attn = NeighbourhoodAttention(dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, mlp_ratio)

    def neighbourhood_kv(self, ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ctx [B, h, w, D] -> K, V [B, h, w, K^2, D] (padding = projection of LayerNorm(0))."""
        b, h, w, d = ctx.shape
        att = self.cross_attn
        nctx = self.norm_context(ctx)
        kv = torch.cat([att.key_proj(nctx), att.value_proj(nctx)], -1)  # B h w 2D
        pad = self.norm_context(ctx.new_zeros(1, d))
        pad_kv = torch.cat([att.key_proj(pad), att.value_proj(pad)], -1)[0]  # 2D
        p = self.kernel // 2
        full = pad_kv.expand(b, h + 2 * p, w + 2 * p, 2 * d).clone()
        full[:, p : p + h, p : p + w] = kv
        nb = full.unfold(1, self.kernel, 1).unfold(2, self.kernel, 1)  # B h w 2D K K
        nb = nb.permute(0, 1, 2, 4, 5, 3).reshape(b, h, w, self.kernel * self.kernel, 2 * d)
        return nb[..., :d], nb[..., d:]

    def forward(self, q: torch.Tensor, ctx: torch.Tensor, alibi: torch.Tensor) -> torch.Tensor:
        """``alibi`` [heads, K^2] additive attention bias."""
        b, h, w, f2, d = q.shape
        k, v = self.neighbourhood_kv(ctx)
        hd = d // self.heads
        qq = self.cross_attn.query_proj(self.norm1(q)).reshape(b, h, w, f2, self.heads, hd)
        k = k.reshape(b, h, w, -1, self.heads, hd)
        v = v.reshape(b, h, w, -1, self.heads, hd)
        logits = torch.einsum("bhwqnc,bhwknc->bhwnqk", qq, k) / math.sqrt(hd) + alibi[:, None, :].to(q.dtype)
        out = torch.einsum("bhwnqk,bhwknc->bhwqnc", logits.softmax(-1), v).reshape(b, h, w, f2, d)
        q = q + self.cross_attn.final_proj(out)
        return q + self.mlp(self.norm2(q))


def alibi_bias(heads: int, kernel: int) -> torch.Tensor:
    """[heads, K, K]: heads 0..heads/2-1 get -slope*|dx|, the others -slope*|dy| (slopes 24^(-(i+1)/(heads/2)))."""
    r = torch.arange(kernel, dtype=torch.float64) - (kernel - 1) / 2
    dy, dx = torch.meshgrid(r, r, indexing="ij")
    half = heads // 2
    sx = torch.tensor(alibi_slopes(half), dtype=torch.float64)
    sy = torch.tensor(alibi_slopes(heads - half), dtype=torch.float64)
    return torch.cat([-sx[:, None, None] * dx.abs(), -sy[:, None, None] * dy.abs()], 0).float()


class AttentionUpsampler(nn.Module):
    """Computes convex upsampling weights [B, K^2, 4h, 4w] from frame-0 track features and the window's flow."""

    def __init__(self, cfg):
        super().__init__()
        c, fd, s = cfg.latent_dim, cfg.upsample_flow_dim, cfg.window_len
        self.factor, self.kernel = cfg.upsample_factor, cfg.upsample_kernel
        self.attnup_feat_cnn = DecoderUpsampler(c)
        dim = c + fd
        self.cross_blocks = nn.ModuleList(
            [
                NeighbourhoodCrossAttnBlock(dim, cfg.upsample_heads, self.kernel, cfg.mlp_ratio)
                for _ in range(cfg.upsample_blocks)
            ]
        )
        self.flow_mlp = nn.Sequential(
            nn.Conv2d(2 * s, 2 * fd, 7, padding=3), nn.ReLU(), nn.Conv2d(2 * fd, fd, 3, padding=1), nn.ReLU()
        )
        self.out = nn.Linear(dim, self.kernel * self.kernel)
        if cfg.zero_init_head:  # start as nearest upsampling: all the convex weight on the centre tap
            nn.init.zeros_(self.out.weight)
            with torch.no_grad():
                self.out.bias.zero_()
                self.out.bias[(self.kernel * self.kernel) // 2] = NEAREST_INIT_LOGIT
        # a persistent buffer, as in the official module (it is part of official state dicts)
        self.register_buffer("alibi_bias", alibi_bias(cfg.upsample_heads, self.kernel))

    def forward(self, feat_low: torch.Tensor, flow_low: torch.Tensor) -> torch.Tensor:
        """feat_low [B, C, h, w]; flow_low [B, 2S, h, w] = (x_t - grid) / Dz for the window -> weights."""
        b, _, h, w = feat_low.shape
        f = self.factor
        flow_feat = self.flow_mlp(flow_low)
        ctx = torch.cat([feat_low, flow_feat], 1).permute(0, 2, 3, 1)  # B h w D
        fine = self.attnup_feat_cnn(feat_low)  # B C 4h 4w
        flow_up = flow_feat.repeat_interleave(f, 2).repeat_interleave(f, 3)
        q = torch.cat([fine, flow_up], 1).permute(0, 2, 3, 1)  # B H W D
        d = q.shape[-1]
        q = q.reshape(b, h, f, w, f, d).transpose(2, 3).reshape(b, h, w, f * f, d)
        alibi = self.alibi_bias.reshape(self.alibi_bias.shape[0], -1)
        for blk in self.cross_blocks:
            q = blk(q, ctx, alibi)
        wts = self.out(q).softmax(-1)  # B h w f2 K2
        wts = wts.reshape(b, h, w, f, f, -1).permute(0, 5, 1, 3, 2, 4)  # B K2 h f w f
        return wts.reshape(b, self.kernel * self.kernel, h * f, w * f)
