"""The DELTA network: encoder, 4D correlation, log-depth cues, EfficientUpdateFormer, sliding windows, upsampler.

Coordinates inside the model are in H/4 feature units with align-corners convention: feature cell (i, j) is the
full-resolution pixel (4j, 4i). Depth enters only as ratios (d_t / d_0 and D_t(x_t) / d_t) and is updated
multiplicatively (d <- d * exp(0.1 * clamp(delta, -50, 50))), so scaling the input depth scales the output depth and
leaves everything else unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from .config import DeltaConfig
from .corr import CorrFeatures, sample_support
from .embeddings import emb2d, sincos_1d, sincos_2d_grid
from .encoder import BasicEncoder
from .kernels import upsample_convex
from .sampling import patch_offsets, sample_map
from .update_former import EfficientUpdateFormer
from .upsampler import AttentionUpsampler

INIT_LOGIT = 10.0  # visibility / confidence logits start at 10 (official)


@dataclass
class WindowOutput:
    start: int
    coords: list  # per iteration [B, S, N, 2] (H/4 units)
    depth: list  # per iteration [B, S, N]
    vis_logit: torch.Tensor  # [B, S, N]
    conf_logit: torch.Tensor  # [B, S, N]


@dataclass
class ModelOutput:
    coords: torch.Tensor  # [B, T, N, 2] all tracks (sparse first, then dense grid), full-resolution pixels
    depth: torch.Tensor  # [B, T, N]
    vis_logit: torch.Tensor  # [B, T, N]
    conf_logit: torch.Tensor  # [B, T, N]
    n_sparse: int  # anchors + sparse queries (the dense grid starts here)
    n_anchor: int  # anchors come first; in efficient mode only they feed the virtual tokens
    dense_hw: tuple[int, int] | None
    dense_origin: tuple[int, int] | None  # (y0, x0) of the dense crop in H/4 cells
    windows: list = field(default_factory=list)
    upsample_weights: torch.Tensor | None = None  # [B, K^2, 4hc, 4wc]
    dense: dict | None = None  # full-resolution uv, depth, vis_logit, conf_logit of the dense crop
    # full-resolution query-frame depth of the dense crop [B, 4hc, 4wc] (only with cfg.dense_depth == "log_ratio")
    dense_query_depth: torch.Tensor | None = None


class DeltaModel(nn.Module):
    def __init__(self, cfg: DeltaConfig):
        super().__init__()
        self.cfg = cfg.validate()
        c = cfg.latent_dim
        # Attribute names are the official ones (densetrack3d.py), so official state dicts load without renaming.
        self.fnet = BasicEncoder(cfg.encoder_dims, c)
        self.updateformer = EfficientUpdateFormer(cfg, cfg.token_dim, 3 + c)
        self.norm = nn.GroupNorm(1, c)
        self.track_feat_updater = nn.Sequential(nn.Linear(c, c), nn.GELU())
        self.vis_predictor = nn.Sequential(nn.Linear(c, 1))
        self.conf_predictor = nn.Sequential(nn.Linear(c, 1))
        if cfg.zero_init_head:  # start as zero motion: every point visible and confident (logits at INIT_LOGIT)
            for head in (self.vis_predictor[0], self.conf_predictor[0]):
                nn.init.zeros_(head.weight)
                nn.init.constant_(head.bias, INIT_LOGIT)
        self.upsample_transformer = AttentionUpsampler(cfg)
        self.cmdtop = CorrFeatures(cfg.corr_radius, cfg.corr_mlp_channels, cfg.corr_levels)
        # persistent buffers, as in the official module (both are part of official state dicts)
        self.register_buffer("time_emb", sincos_1d(cfg.token_dim, torch.arange(cfg.window_len)).float()[None])
        p = cfg.corr_patch
        self.register_buffer("delta_corr", patch_offsets(cfg.corr_radius).reshape(p, p, 2))
        self._pos_cache: dict = {}

    # ------------------------------------------------------------------------------------------------------------------
    def encode(self, video: torch.Tensor, chunk: int = 8):
        """video [B, T, 3, H, W] in [0, 255] -> (feats [B, T, C, h, w], pyramid: list of [B, T, H_l, W_l, C_l])."""
        b, t = video.shape[:2]
        frames = video.reshape(b * t, *video.shape[2:]) * (2.0 / 255.0) - 1.0
        feats, pyr = [], [[], [], []]
        for i in range(0, b * t, chunk):
            f, p = self.fnet(frames[i : i + chunk])
            feats.append(f)
            for lvl, x in enumerate(p):
                pyr[lvl].append(x)
        feats = torch.cat(feats).reshape(b, t, *feats[0].shape[1:])
        pyramid = [torch.cat(x).reshape(b, t, *x[0].shape[1:]).permute(0, 1, 3, 4, 2).contiguous() for x in pyr]
        return feats, pyramid

    def _pos_grid(self, h: int, w: int, device, dtype) -> torch.Tensor:
        key = (h, w, str(device), dtype)
        if key not in self._pos_cache:
            self._pos_cache[key] = sincos_2d_grid(self.cfg.token_dim, h, w).to(device=device, dtype=dtype)[None]
        return self._pos_cache[key]

    @staticmethod
    def _gather_at_query_frames(maps: torch.Tensor, q_t: torch.Tensor, fn):
        """maps [B, T, ...]; evaluate fn(maps[:, t]) for each distinct query frame t and keep, per track, its own."""
        out = None
        for t in torch.unique(q_t).tolist():
            val = fn(maps[:, t])
            sel = (q_t == t).reshape(*q_t.shape, *([1] * (val.dim() - 2)))
            out = val if out is None else torch.where(sel, val, out)
        return out

    # ------------------------------------------------------------------------------------------------------------------
    def forward(
        self,
        video: torch.Tensor,
        depth: torch.Tensor,
        sparse_queries: torch.Tensor | None = None,
        iters: int | None = None,
        dense: bool = True,
        efficient: bool | None = None,
        dense_crop: tuple[int, int, int, int] | None = None,
        backend: str = "auto",
        corr_chunk: int | None = None,
        keep_windows: bool = False,
        progress=None,
        with_anchors: bool | None = None,
        encoded: tuple | None = None,
    ) -> ModelOutput:
        """video [B, T, 3, H, W] (0..255), depth [B, T, H, W] metres; sparse_queries [B, N, 3] (t, x, y) pixels.

        Dense mode adds one track per H/4 cell of the frame-0 grid (or of ``dense_crop`` = (y0, x0, hc, wc) cells).
        ``with_anchors`` (default: dense and no sparse queries) prepends the anchor grid; ``efficient`` (default: not
        training) restricts the virtual tokens' global attention to the anchors, which makes every non-anchor sparse
        track independent of the other sparse tracks (so queries can be processed in chunks with identical results).
        ``encoded`` = ``self.encode(video)`` reuses features computed once (e.g. for several query chunks).
        """
        cfg = self.cfg
        b, t, _, hh, ww = video.shape
        h, w = hh // 4, ww // 4
        iters = iters if iters is not None else (cfg.train_iters if self.training else cfg.eval_iters)
        efficient = (not self.training) if efficient is None else efficient
        dev, dt = video.device, video.dtype
        depth = depth.clamp(min=cfg.depth_min)
        feats, pyramid = self.encode(video) if encoded is None else encoded
        depth_low = depth[:, :, ::4, ::4][:, :, :h, :w]

        # ---- queries: sparse (given or anchors) first, then the dense grid --------------------------------------------
        with_anchors = (dense and sparse_queries is None) if with_anchors is None else with_anchors
        anchors = anchor_queries(cfg.anchor_grid, hh, ww, b, dev, dt) if with_anchors else video.new_zeros(b, 0, 3)
        n_anchor = anchors.shape[1]
        if sparse_queries is not None:
            anchors = torch.cat([anchors, sparse_queries.to(dt)], 1)
        sparse_queries = anchors
        n_sparse = sparse_queries.shape[1]
        q_t = sparse_queries[..., 0].round().long()
        if n_sparse and (int(q_t.min()) < 0 or int(q_t.max()) >= t):
            raise ValueError(f"query frames must lie in [0, {t - 1}], got [{int(q_t.min())}, {int(q_t.max())}]")
        q_xy = sparse_queries[..., 1:] / 4.0
        dense_hw = origin = None
        if dense:
            y0, x0, hc, wc = dense_crop if dense_crop is not None else (0, 0, h, w)
            dense_hw, origin = (hc, wc), (y0, x0)
            gy, gx = torch.meshgrid(
                torch.arange(y0, y0 + hc, device=dev, dtype=dt), torch.arange(x0, x0 + wc, device=dev, dtype=dt),
                indexing="ij",
            )  # fmt: skip
            grid = torch.stack([gx, gy], -1).reshape(1, -1, 2).expand(b, -1, -1)
            q_xy = torch.cat([q_xy, grid], 1)
            q_t = torch.cat([q_t, q_t.new_zeros(b, hc * wc)], 1)
        n = q_xy.shape[1]

        # ---- per-track query features, support patches and query depth -------------------------------------------------
        track_feat = self._gather_at_query_frames(feats, q_t, lambda f: sample_map(f, q_xy))  # B N C
        supports = [
            self._gather_at_query_frames(
                pyramid[lvl].permute(0, 1, 4, 2, 3),
                q_t,
                lambda f, lvl=lvl: sample_support(f, q_xy, cfg.corr_radius, lvl),
            )
            for lvl in range(3)
        ]
        q_pix = (q_xy * 4.0).round().long()
        qx, qy = q_pix[..., 0].clamp(0, ww - 1), q_pix[..., 1].clamp(0, hh - 1)
        q_depth = depth[torch.arange(b, device=dev)[:, None], q_t, qy, qx]  # nearest sample at the query frame

        # ---- sliding windows ---------------------------------------------------------------------------------------
        s, step = cfg.window_len, cfg.window_step
        nw = 1 if t <= s else math.ceil((t - s) / step) + 1
        t_pad = s + step * (nw - 1)
        frame_idx = torch.arange(t_pad, device=dev).clamp(max=t - 1)  # padding repeats the last frame
        coords = q_xy[:, None].expand(b, t_pad, n, 2).clone().detach()
        tdepth = q_depth[:, None].expand(b, t_pad, n).clone().detach()
        vis = torch.full((b, t_pad, n), INIT_LOGIT, device=dev, dtype=dt)
        conf = torch.full((b, t_pad, n), INIT_LOGIT, device=dev, dtype=dt)
        is_dense = torch.arange(n, device=dev) >= n_sparse  # [N]
        overlap = s - step
        windows, up_w = [], None
        rng = range(nw) if progress is None else progress(range(nw), desc="windows")
        for wi in rng:
            s0 = wi * step
            fr = frame_idx[s0 : s0 + s]
            if s0 + s <= t:  # a plain slice (a view): no copy of the feature maps per window
                pyr_w = [p[:, s0 : s0 + s] for p in pyramid]
                dlow_w = depth_low[:, s0 : s0 + s]
            else:  # the last window is padded by repeating the last frame
                pyr_w = [p[:, fr] for p in pyramid]
                dlow_w = depth_low[:, fr]
            # Window initialisation (official): a track queried before the end of the previous window's overlap
            # continues from its last ``overlap`` predictions (the new frames repeat the last one); every other track
            # (queried later) starts at its query: query position, query depth, logits at INIT_LOGIT.
            c = q_xy[:, None].expand(b, s, n, 2).clone()
            dd = q_depth[:, None].expand(b, s, n).clone()
            vis_in = torch.full((b, s, n), INIT_LOGIT, device=dev, dtype=dt)
            if wi > 0:
                copy = ((q_t < s0 + overlap) | is_dense)[:, None]  # B 1 N
                rep = torch.arange(s, device=dev).clamp(max=overlap - 1) + s0  # frames s0..s0+overlap-1, then repeat
                c = torch.where(copy[..., None], coords[:, rep], c)
                dd = torch.where(copy, tdepth[:, rep], dd)
                vis_in = torch.where(copy, vis[:, rep], vis_in)  # not refreshed across iterations (official)
            frames_w = s0 + torch.arange(s, device=dev)
            # attention mask: tracks queried within this window or before (dense tracks always); their track features
            # are zeroed otherwise (official ``attention_mask``)
            amask = ((q_t < s0 + s) | is_dense)[:, None, :].expand(b, s, n)
            feat = track_feat[:, None].expand(b, s, n, -1) * amask[..., None].to(dt)
            # track mask token: 1 from the query frame on; in later windows 0 on the overlap frames of sparse tracks
            tmask = frames_w[None, :, None] >= q_t[:, None, :]
            if wi > 0:
                tmask = tmask & (torch.arange(s, device=dev) >= overlap)[None, :, None]
            mask = (tmask | is_dense).to(dt)
            it_coords, it_depth = [], []
            # position embedding: sampled once per window at the window's initial frame-0 position (official)
            pos = sample_map(self._pos_grid(h, w, dev, dt).expand(b, -1, -1, -1), c[:, 0])  # B N D
            for _ in range(iters):
                c, dd = c.detach(), dd.detach()
                corr = self.cmdtop(pyr_w, c, supports, chunk=corr_chunk, backend=backend)
                rel = c - c[:, :1]
                dsamp = sample_map(dlow_w.reshape(b * s, 1, h, w), c.reshape(b * s, n, 2))[..., 0].reshape(b, s, n)
                tokens = torch.cat(
                    [
                        emb2d(rel, cfg.pos_emb_freqs),
                        rel,
                        (dd / dd[:, :1])[..., None],
                        corr,
                        (dsamp / dd)[..., None],
                        feat,
                        mask[..., None].expand(b, s, n, 1),
                        vis_in[..., None],
                    ],
                    -1,
                )
                tokens = tokens + pos[:, None] + self.time_emb[:, :s, None].to(dt)
                delta = self.updateformer(
                    tokens.transpose(1, 2), n_sparse, dense_hw, efficient, n_anchor, attn_mask=amask
                ).transpose(1, 2)
                dfeat = delta[..., 3:]
                feat = feat + self.track_feat_updater(self.norm(dfeat.reshape(-1, dfeat.shape[-1]))).reshape(feat.shape)
                c = c + delta[..., :2]
                dd = dd * torch.exp(
                    cfg.depth_update_scale * delta[..., 2].clamp(-cfg.depth_update_clamp, cfg.depth_update_clamp)
                )
                it_coords.append(c)
                it_depth.append(dd)
            vis_w = self.vis_predictor(feat)[..., 0]
            conf_w = self.conf_predictor(feat)[..., 0]
            if wi == 0 and dense:
                up_w = self._upsample_weights(
                    feat[:, 0, n_sparse:], c[:, :, n_sparse:], q_xy[:, n_sparse:], dense_hw, w
                )
            if keep_windows:
                windows.append(WindowOutput(s0, it_coords, it_depth, vis_w, conf_w))
            with torch.no_grad():
                coords[:, s0 : s0 + s], tdepth[:, s0 : s0 + s] = c.detach(), dd.detach()
                vis[:, s0 : s0 + s], conf[:, s0 : s0 + s] = vis_w.detach(), conf_w.detach()

        out = ModelOutput(
            coords=coords[:, :t] * 4.0,
            depth=tdepth[:, :t],
            vis_logit=vis[:, :t],
            conf_logit=conf[:, :t],
            n_sparse=n_sparse,
            n_anchor=n_anchor,
            dense_hw=dense_hw,
            dense_origin=origin,
            windows=windows,
            upsample_weights=up_w,
        )
        if dense:
            if cfg.dense_depth == "log_ratio":
                y0, x0 = origin
                f = cfg.upsample_factor
                out.dense_query_depth = depth[:, 0, y0 * f : (y0 + hc) * f, x0 * f : (x0 + wc) * f]
            out.dense = self.upsample_fields(
                up_w, coords[:, :t, n_sparse:], tdepth[:, :t, n_sparse:], vis[:, :t, n_sparse:],
                conf[:, :t, n_sparse:], dense_hw, origin, backend, query_depth=out.dense_query_depth,
            )  # fmt: skip
        return out

    # ------------------------------------------------------------------------------------------------------------------
    def _upsample_weights(self, feat0, c, q_xy, hw, w_low):
        b, s = c.shape[:2]
        hc, wc = hw
        feat_low = feat0.reshape(b, hc, wc, -1).permute(0, 3, 1, 2)
        flow = ((c - q_xy[:, None]) / float(w_low)).reshape(b, s, hc, wc, 2).permute(0, 1, 4, 2, 3)
        return self.upsample_transformer(feat_low, flow.reshape(b, 2 * s, hc, wc))

    def upsample_fields(
        self, weights, coords, depth, vis_logit, conf_logit, hw, origin, backend="auto", query_depth=None
    ):
        """Apply the convex weights to low-res dense fields [B, T, hc*wc(, 2)] (coords in H/4 units) -> full res.

        Depth: by default (official) the track depth itself is upsampled. With ``query_depth`` (the full-resolution
        query-frame depth of the crop, [B, 4hc, 4wc]) the log-depth change log(d_t / d_0) is upsampled instead and
        multiplied by it, so each full-resolution track starts at its own input depth (``dense_depth="log_ratio"``).
        """
        b, t = coords.shape[:2]
        hc, wc = hw
        y0, x0 = origin
        f = self.cfg.upsample_factor
        dev, dt = coords.device, coords.dtype
        gy, gx = torch.meshgrid(
            torch.arange(y0, y0 + hc, device=dev, dtype=dt), torch.arange(x0, x0 + wc, device=dev, dtype=dt),
            indexing="ij",
        )  # fmt: skip
        grid = torch.stack([gx, gy], -1).reshape(1, 1, -1, 2)
        disp = ((coords - grid) * f).reshape(b, t, hc, wc, 2).permute(0, 1, 4, 2, 3).reshape(b, 2 * t, hc, wc)
        fields = [disp]
        if depth is not None and query_depth is not None:
            d0 = query_depth[:, ::f, ::f].reshape(b, 1, -1)  # the grid tracks' query depth (nearest sample)
            depth = torch.log(depth / d0)
        for x in (depth, vis_logit, conf_logit):
            if x is not None:
                fields.append(x.reshape(b, t, hc, wc))
        up = upsample_convex(torch.cat(fields, 1), weights.to(dt), f, self.cfg.upsample_kernel, backend=backend)
        H, W = hc * f, wc * f
        fy, fx = torch.meshgrid(
            torch.arange(y0 * f, y0 * f + H, device=dev, dtype=dt), torch.arange(x0 * f, x0 * f + W, device=dev, dtype=dt),
            indexing="ij",
        )  # fmt: skip
        uv = up[:, : 2 * t].reshape(b, t, 2, H, W).permute(0, 1, 3, 4, 2) + torch.stack([fx, fy], -1)
        out = {"uv": uv}
        i = 2 * t
        for name, x in (("depth", depth), ("vis_logit", vis_logit), ("conf_logit", conf_logit)):
            if x is not None:
                out[name] = up[:, i : i + t]
                i += t
        if depth is not None and query_depth is not None:
            out["depth"] = query_depth[:, None] * torch.exp(out["depth"])
        return out


def anchor_queries(grid: tuple[int, int], height: int, width: int, batch: int, device, dtype) -> torch.Tensor:
    """The sparse anchor queries (``get_points_on_a_grid`` with margin W/64) at frame 0: [B, gh*gw, 3] (t, x, y)."""
    gh, gw = grid
    margin = width / 64.0
    ys = torch.linspace(margin, height - 1 - margin, gh, device=device, dtype=dtype)
    xs = torch.linspace(margin, width - 1 - margin, gw, device=device, dtype=dtype)
    yy, xx = torch.meshgrid(ys, xs, indexing="ij")
    q = torch.stack([torch.zeros_like(xx), xx, yy], -1).reshape(1, -1, 3)
    return q.expand(batch, -1, -1).clone()
