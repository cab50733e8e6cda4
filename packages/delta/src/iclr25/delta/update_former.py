"""EfficientUpdateFormer: time attention, virtual tokens, anchor-only global attention and 6x6 local attention."""

from __future__ import annotations

import torch
import torch.nn as nn

from .attention import AttnBlock, CrossAttnBlock, window_attention


class EfficientUpdateFormer(nn.Module):
    """Transformer over track tokens [B, N, S, D_in] (N = n_sparse sparse/anchor tokens first, then a dense h x w grid).

    Each of ``depth`` blocks runs, in order: (1) time self-attention of every track and virtual token over the S
    frames; (2) virtual <- point cross-attention per frame, whose keys are only the anchor tokens in efficient mode and all
    real tokens otherwise; (3) virtual self-attention; (4) local self-attention of the dense tokens in
    non-overlapping ``window`` x ``window`` cells of the grid (padding masked); (5) point <- virtual cross-attention.
    Module names are the official ones, so official state dicts load without renaming.
    """

    def __init__(self, cfg, input_dim: int, output_dim: int):
        super().__init__()
        d, heads, r = cfg.hidden_size, cfg.num_heads, cfg.mlp_ratio
        self.window = cfg.local_window
        # parameter names and registration order follow the official module (``virual_tracks`` is its spelling)
        self.input_transform = nn.Linear(input_dim, d)
        self.flow_head = nn.Linear(d, output_dim)
        self.virual_tracks = nn.Parameter(torch.randn(1, cfg.num_virtual_tracks, 1, d))
        self.time_blocks = nn.ModuleList([AttnBlock(d, heads, r) for _ in range(cfg.num_blocks)])
        self.space_virtual_blocks = nn.ModuleList([AttnBlock(d, heads, r) for _ in range(cfg.num_blocks)])
        # point <- virtual cross-attention (official name: space_point2virtual_blocks)
        self.space_point2virtual_blocks = nn.ModuleList([CrossAttnBlock(d, heads, r) for _ in range(cfg.num_blocks)])
        # virtual <- point cross-attention (official name: space_virtual2point_blocks)
        self.space_virtual2point_blocks = nn.ModuleList([CrossAttnBlock(d, heads, r) for _ in range(cfg.num_blocks)])
        self.space_local_blocks = nn.ModuleList([AttnBlock(d, heads, r) for _ in range(cfg.num_blocks)])
        self._init(cfg.zero_init_head)

    def _init(self, zero_head: bool) -> None:
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        if zero_head:
            nn.init.zeros_(self.flow_head.weight)
        else:
            nn.init.trunc_normal_(self.flow_head.weight, std=0.001)
        nn.init.zeros_(self.flow_head.bias)

    def forward(
        self,
        tokens: torch.Tensor,
        n_sparse: int,
        dense_hw: tuple[int, int] | None,
        efficient: bool,
        n_anchor: int | None = None,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``n_anchor`` (default ``n_sparse``): the first tokens, the only keys of virtual tokens in efficient mode.

        ``attn_mask`` [B, S, N] bool (official ``attention_mask``): tracks that are not yet queried in this window are
        masked as keys of the virtual tokens and as queries of the point <- virtual attention.
        """
        b, n, s, _ = tokens.shape
        n_dense = 0 if dense_hw is None else dense_hw[0] * dense_hw[1]
        if n_sparse + n_dense != n:
            raise ValueError(f"token count {n} != n_sparse {n_sparse} + dense {n_dense}")
        x = self.input_transform(tokens)
        v = self.virual_tracks.expand(b, -1, s, -1)
        nv = v.shape[1]
        x = torch.cat([x, v], 1)  # B, N+V, S, D
        d = x.shape[-1]
        n_anchor = n_sparse if n_anchor is None else n_anchor
        use_anchor_keys = efficient and n_anchor > 0
        amask = None
        if attn_mask is not None and not bool(attn_mask.all()):
            amask = attn_mask.reshape(b * s, n)
        for i in range(len(self.time_blocks)):
            x = self.time_blocks[i](x.reshape(b * (n + nv), s, d)).reshape(b, n + nv, s, d)
            frames = x.transpose(1, 2)  # B, S, N+V, D
            pts, vt = frames[:, :, :n], frames[:, :, n:]
            keys = pts[:, :, :n_anchor] if use_anchor_keys else pts
            kmask = None if amask is None else (amask[:, :n_anchor] if use_anchor_keys else amask)
            vt = self.space_virtual2point_blocks[i](vt.reshape(b * s, nv, d), keys.reshape(b * s, -1, d), mask=kmask)
            vt = self.space_virtual_blocks[i](vt)
            pts = pts.reshape(b * s, n, d)
            if n_dense:
                dense = window_attention(self.space_local_blocks[i], pts[:, n_sparse:], dense_hw, self.window)
                pts = torch.cat([pts[:, :n_sparse], dense], 1)
            pts = self.space_point2virtual_blocks[i](pts, vt, query_mask=amask)
            x = torch.cat([pts.reshape(b, s, n, d), vt.reshape(b, s, nv, d)], 2).transpose(1, 2)
        return self.flow_head(x[:, :n])
