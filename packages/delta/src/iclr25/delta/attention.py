"""Attention building blocks: pre-LayerNorm self/cross-attention blocks and 6x6 window attention over a grid."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    """Multi-head attention with biased q/kv projections (official ``Attention(qkv_bias=True)``: to_q, to_kv, to_out)."""

    def __init__(self, dim: int, heads: int, context_dim: int | None = None):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_kv = nn.Linear(context_dim or dim, 2 * dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        query_mask: torch.Tensor | None = None,
    ):
        """x [M, L, D], context [M, Lc, Dc]; ``mask`` [M, Lc] bool (True = attend) masks keys; ``query_mask`` [M, L]
        bool masks query rows: a masked row gets a -max bias on every key, i.e. a uniform average (official)."""
        ctx = x if context is None else context
        m, n, d = x.shape
        q = self.to_q(x).reshape(m, n, self.heads, -1).transpose(1, 2)
        k, v = self.to_kv(ctx).reshape(m, ctx.shape[1], 2, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn_mask = None
        if query_mask is not None:
            neg = torch.finfo(q.dtype).min
            keep = query_mask[:, None, :, None]
            if mask is not None:
                keep = keep & mask[:, None, None, :]
            attn_mask = torch.zeros(keep.shape, dtype=q.dtype, device=q.device).masked_fill(~keep, neg)
            attn_mask = attn_mask.expand(m, 1, n, ctx.shape[1])
        elif mask is not None:
            attn_mask = mask[:, None, None, :]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.to_out(out.transpose(1, 2).reshape(m, n, d))


class Mlp(nn.Module):
    def __init__(self, dim: int, ratio: float):
        super().__init__()
        hidden = int(dim * ratio)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class AttnBlock(nn.Module):
    """x + Attn(LN(x)); x + MLP(LN(x)); LayerNorms without affine parameters (official)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.mlp = Mlp(dim, mlp_ratio)

    def forward(self, x, mask=None):
        x = x + self.attn(self.norm1(x), mask=mask)
        return x + self.mlp(self.norm2(x))


class CrossAttnBlock(nn.Module):
    """x + Attn(LN(x), LN_ctx(context)); x + MLP(LN(x)); the context LayerNorm has affine parameters (official)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm_context = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.cross_attn = Attention(dim, heads)
        self.mlp = Mlp(dim, mlp_ratio)

    def forward(self, x, context, mask=None, query_mask=None):
        x = x + self.cross_attn(self.norm1(x), self.norm_context(context), mask=mask, query_mask=query_mask)
        return x + self.mlp(self.norm2(x))


def grid_to_windows(x: torch.Tensor, hw: tuple[int, int], size: int):
    """[M, h*w, D] -> ([M*nw, size*size, D], valid mask [M*nw, size*size]); the grid is zero-padded to multiples of
    ``size`` and the padded tokens are marked invalid."""
    m, _, d = x.shape
    h, w = hw
    ph, pw = -h % size, -w % size
    g = F.pad(x.reshape(m, h, w, d), (0, 0, 0, pw, 0, ph))
    valid = F.pad(torch.ones(1, h, w, device=x.device, dtype=torch.bool), (0, pw, 0, ph))
    hh, ww = (h + ph) // size, (w + pw) // size

    def split(t):
        t = t.reshape(t.shape[0], hh, size, ww, size, *t.shape[3:]).transpose(2, 3)
        return t.reshape(t.shape[0] * hh * ww, size * size, *t.shape[5:])

    return split(g), split(valid.expand(m, -1, -1))


def windows_to_grid(x: torch.Tensor, m: int, hw: tuple[int, int], size: int) -> torch.Tensor:
    """Inverse of ``grid_to_windows`` (padding dropped): [M*nw, size*size, D] -> [M, h*w, D]."""
    h, w = hw
    hh, ww = -(-h // size), -(-w // size)
    d = x.shape[-1]
    g = x.reshape(m, hh, ww, size, size, d).transpose(2, 3).reshape(m, hh * size, ww * size, d)
    return g[:, :h, :w].reshape(m, h * w, d)


def window_attention(block: AttnBlock, x: torch.Tensor, hw: tuple[int, int], size: int) -> torch.Tensor:
    """Apply ``block`` within non-overlapping ``size`` x ``size`` windows of the token grid ``x`` [M, h*w, D]."""
    win, valid = grid_to_windows(x, hw, size)
    out = block(win, mask=valid)
    return windows_to_grid(out, x.shape[0], hw, size)
