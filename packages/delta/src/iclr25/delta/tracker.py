"""``DeltaTracker``: the public tracking API (dense every-pixel 3D tracks, sparse query tracks, backward tracking)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .config import DeltaConfig
from .geometry import as_intrinsics_matrix, uvd_to_xyz
from .model import DeltaModel

QUERY_TOLERANCE_PX = 1e-3  # queries may exceed the image by float round-off only


@dataclass
class DenseTracks:
    """Dense 3D tracks of every pixel of the query frame; all tensors on CPU, T frames, H x W pixels."""

    uv: torch.Tensor  # [T, H, W, 2] pixel (x, y)
    depth: torch.Tensor  # [T, H, W] metres
    xyz: torch.Tensor  # [T, H, W, 3] camera coordinates
    visibility: torch.Tensor  # [T, H, W] bool
    vis_prob: torch.Tensor  # [T, H, W]
    confidence: torch.Tensor  # [T, H, W]
    query_frame: int = 0


@dataclass
class SparseTracks:
    uvd: torch.Tensor  # [T, N, 3] (x, y, depth)
    xyz: torch.Tensor  # [T, N, 3]
    visibility: torch.Tensor  # [T, N] bool
    vis_prob: torch.Tensor  # [T, N]
    confidence: torch.Tensor  # [T, N]


def _as_tensor(x, name: str, allow_sequence: bool = False) -> torch.Tensor:
    if allow_sequence and isinstance(x, (list, tuple)):
        x = np.asarray(x, dtype=np.float32)
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(x).__name__}")
    return x


def validate_inputs(video, depth) -> tuple[torch.Tensor, torch.Tensor]:
    """Check and convert (video [T,3,H,W] uint8 or float in [0, 255], depth [T,H,W] metres > 0) to float32."""
    video, depth = _as_tensor(video, "video"), _as_tensor(depth, "depth")
    if video.dim() != 4 or video.shape[1] != 3:
        raise ValueError(f"video must have shape [T, 3, H, W], got {tuple(video.shape)}")
    if video.shape[0] == 0:
        raise ValueError("video has T=0 frames; at least one frame is needed")
    if depth.dim() != 3:
        raise ValueError(f"depth must have shape [T, H, W] (metres), got {tuple(depth.shape)}")
    if depth.shape[0] != video.shape[0]:
        raise ValueError(f"video has T={video.shape[0]} frames but depth has T={depth.shape[0]}")
    if tuple(depth.shape[1:]) != tuple(video.shape[2:]):
        raise ValueError(f"depth size {tuple(depth.shape[1:])} differs from video size {tuple(video.shape[2:])}")
    if video.dtype == torch.uint8:
        video = video.float()
    elif video.is_floating_point():
        video = video.float()
        if not torch.isfinite(video).all() or video.min() < 0 or video.max() > 255:
            raise ValueError("float video must be finite and in [0, 255] (the official convention)")
        if video.max() <= 1.0:
            raise ValueError(
                "float video has all values in [0, 1]; the tracker expects uint8 or float in [0, 255] (the official "
                "convention): pass video * 255"
            )
    else:
        raise TypeError(f"video must be uint8 or floating point, got {video.dtype}")
    depth = depth.float() if depth.is_floating_point() else depth.to(torch.float32)
    if not torch.isfinite(depth).all():
        raise ValueError("depth contains non-finite values; depth must be finite metric depth in metres")
    if (depth <= 0).any():
        raise ValueError("depth must be strictly positive (metric depth in metres)")
    return video, depth


class DeltaTracker:
    """Dense 3D tracker. ``DeltaTracker(DeltaConfig.tiny())``, ``DeltaTracker("ckpt.pt")`` or ``from_checkpoint``.

    ``memory_budget_gb`` bounds the correlation working set by chunking tracks (dense) and queries (sparse).
    """

    def __init__(
        self,
        config: DeltaConfig | str | os.PathLike | None = None,
        device: str | torch.device = "cpu",
        model: DeltaModel | None = None,
        backend: str = "auto",
        memory_budget_gb: float = 2.0,
    ):
        if model is None:
            if isinstance(config, (str, os.PathLike)):
                from .checkpoint import load_checkpoint

                model = load_checkpoint(config, map_location=device)
            else:
                model = DeltaModel(config if config is not None else DeltaConfig.paper())
        self.model = model.to(device).eval()
        self.cfg = self.model.cfg
        self.device = torch.device(device)
        self.backend = backend
        budget = float(memory_budget_gb)
        if not np.isfinite(budget) or budget <= 0:
            raise ValueError(f"memory_budget_gb must be a positive number of GiB, got {memory_budget_gb}")
        self.memory_budget_gb = budget

    @classmethod
    def from_checkpoint(cls, path, device="cpu", **kwargs) -> DeltaTracker:
        from .checkpoint import load_checkpoint

        return cls(model=load_checkpoint(path, map_location=device), device=device, **kwargs)

    # ---------------------------------------------------------------------------------------------------------------
    def _tracks_per_chunk(self) -> int:
        """Tracks whose correlation volumes (all levels, one window) fit the memory budget (x4 for MLP activations)."""
        p2 = (2 * self.cfg.corr_radius + 1) ** 2
        per_track = self.cfg.window_len * p2 * (p2 + 3 * max(self.cfg.corr_mlp_channels)) * 4 * 4
        return max(64, int(self.memory_budget_gb * 2**30 / per_track))

    def _model_size(self, h: int, w: int) -> tuple[int, int]:
        if h < 2 or w < 2:
            raise ValueError(f"frames must be at least 2x2 pixels, got {h}x{w}")
        if self.cfg.model_resolution is not None:
            mh, mw = self.cfg.model_resolution
        elif h % 16 or w % 16:
            raise ValueError(f"with model_resolution=None the frame size must be a multiple of 16, got {h}x{w}")
        else:
            mh, mw = h, w
        if (mh // 16) * (mw // 16) < 2:  # the encoder's H/16 stage needs more than one pixel (instance norm)
            raise ValueError(
                f"frames of {mh}x{mw} (model input) are too small: the encoder's H/16 x W/16 stage needs at least 2 "
                "pixels, e.g. 16x32 or 32x32"
            )
        return mh, mw

    def _check_options(self, iters, vis_threshold) -> None:
        if iters is not None and (isinstance(iters, bool) or int(iters) != iters or iters <= 0):
            raise ValueError(f"iters must be a positive integer, got {iters}")
        if vis_threshold is not None and not 0.0 <= float(vis_threshold) <= 1.0:
            raise ValueError(f"vis_threshold is a probability and must lie in [0, 1], got {vis_threshold}")

    def _prepare(self, video, depth):
        video, depth = validate_inputs(video, depth)
        t, _, h, w = video.shape
        mh, mw = self._model_size(h, w)
        v = video.to(self.device)[None]
        d = depth.to(self.device)[None]
        if (mh, mw) != (h, w):
            v = F.interpolate(v[0], (mh, mw), mode="bilinear", align_corners=True)[None]
            d = F.interpolate(d, (mh, mw), mode="nearest")
        return v, d, (h, w), (mh, mw)

    @torch.no_grad()
    def _run_dense(self, v, d, iters, progress):
        out = self.model(
            v, d, iters=iters, dense=True, backend=self.backend, corr_chunk=self._tracks_per_chunk(), progress=progress
        )
        dn = out.dense
        return dn["uv"][0], dn["depth"][0], dn["vis_logit"][0], dn["conf_logit"][0]

    @torch.no_grad()
    def track(
        self,
        video,
        depth,
        intrinsics=None,
        query_frame: int = 0,
        iters: int | None = None,
        vis_threshold: float | None = None,
        backward: bool | None = None,
        progress: bool = False,
    ) -> DenseTracks:
        """Track every pixel of ``query_frame`` through the whole video. video [T,3,H,W], depth [T,H,W] metres.

        Frames before ``query_frame`` are filled by tracking the time-reversed prefix (``backward``, on by default
        when ``query_frame > 0``).
        """
        self._check_options(iters, vis_threshold)
        v, d, (h, w), (mh, mw) = self._prepare(video, depth)
        t = v.shape[1]
        if int(query_frame) != query_frame or not 0 <= int(query_frame) < t:
            raise ValueError(f"query_frame must be in [0, {t - 1}], got {query_frame}")
        q = int(query_frame)
        backward = q > 0 if backward is None else backward
        prog = _progress_fn(progress)
        uv, dep, vis, conf = self._run_dense(v[:, q:], d[:, q:], iters, prog)
        if q > 0:
            if backward:
                buv, bdep, bvis, bconf = self._run_dense(v[:, : q + 1].flip(1), d[:, : q + 1].flip(1), iters, prog)
                parts = [(buv, uv), (bdep, dep), (bvis, vis), (bconf, conf)]
                uv, dep, vis, conf = (torch.cat([bx.flip(0)[:q], fx], 0) for bx, fx in parts)
            else:  # frames before the query: the query position, marked occluded

                def rep(x):
                    return x[:1].expand(q, *x.shape[1:])

                uv, dep = torch.cat([rep(uv), uv], 0), torch.cat([rep(dep), dep], 0)
                vis = torch.cat([torch.full_like(rep(vis), -20.0), vis], 0)
                conf = torch.cat([torch.full_like(rep(conf), -20.0), conf], 0)
        if (mh, mw) != (h, w):
            uv, dep, vis, conf = _resize_dense(uv, dep, vis, conf, (mh, mw), (h, w))
        K = as_intrinsics_matrix(intrinsics, h, w)
        vis_prob = torch.sigmoid(vis)
        thr = self.cfg.vis_threshold if vis_threshold is None else vis_threshold
        uv, dep = uv.float().cpu(), dep.float().cpu()
        return DenseTracks(
            uv=uv,
            depth=dep,
            xyz=uvd_to_xyz(uv, dep, torch.as_tensor(K, dtype=torch.float32)),
            visibility=(vis_prob > thr).cpu(),
            vis_prob=vis_prob.float().cpu(),
            confidence=torch.sigmoid(conf).float().cpu(),
            query_frame=q,
        )

    @torch.no_grad()
    def _run_sparse(self, v, d, queries, iters, chunk):
        outs = []
        for i in range(0, queries.shape[0], chunk):
            o = self.model(
                v, d, sparse_queries=queries[None, i : i + chunk], iters=iters, dense=False, backend=self.backend,
                with_anchors=True, efficient=True,
            )  # fmt: skip
            sl = slice(o.n_anchor, o.n_sparse)  # drop the anchor (support) tracks
            outs.append((o.coords[0, :, sl], o.depth[0, :, sl], o.vis_logit[0, :, sl], o.conf_logit[0, :, sl]))
        return [torch.cat(x, 1) for x in zip(*outs)]

    @torch.no_grad()
    def track_points(
        self,
        video,
        depth,
        queries,
        intrinsics=None,
        iters: int | None = None,
        vis_threshold: float | None = None,
        backward: bool = True,
        chunk: int | None = None,
    ) -> SparseTracks:
        """Track query points ``queries`` [N, 3] (t, x, y) pixels (a 4th column, a query depth, is ignored: the model
        reads the query depth from ``depth``). Frames before each query frame come from a backward pass.

        Every chunk of queries is tracked together with the anchor grid in efficient mode, so a query's result does
        not depend on which other queries share its chunk (the memory budget never changes the answer).
        """
        self._check_options(iters, vis_threshold)
        if chunk is not None and (int(chunk) != chunk or chunk <= 0):
            raise ValueError(f"chunk must be a positive integer, got {chunk}")
        v, d, (h, w), (mh, mw) = self._prepare(video, depth)
        t = v.shape[1]
        q = _as_tensor(queries, "queries", allow_sequence=True)
        if q.dim() == 1 and q.numel() == 0:
            q = q.reshape(0, 3)
        if q.dim() != 2 or q.shape[1] not in (3, 4):
            raise ValueError(f"queries must have shape [N, 3] (t, x, y) or [N, 4], got {tuple(q.shape)}")
        q = q[:, :3].to(self.device, torch.float32).clone()
        if q.shape[0] == 0:  # nothing to track: an empty result
            empty = torch.zeros(t, 0)
            return SparseTracks(torch.zeros(t, 0, 3), torch.zeros(t, 0, 3), empty.bool(), empty, empty.clone())
        if not torch.isfinite(q).all():
            raise ValueError("queries contain non-finite values")
        bad_t = (q[:, 0] < 0) | (q[:, 0] > t - 1) | (q[:, 0] != q[:, 0].round())
        if bad_t.any():
            i = int(torch.nonzero(bad_t)[0])
            raise ValueError(f"query {i} has frame {q[i, 0].item()}; query frames must be integers in [0, {t - 1}]")
        tol = QUERY_TOLERANCE_PX  # float round-off in stored queries (e.g. -3.6e-15) is not "off the image"
        off = (q[:, 1] < -tol) | (q[:, 1] > w - 1 + tol) | (q[:, 2] < -tol) | (q[:, 2] > h - 1 + tol)
        if off.any():
            i = int(torch.nonzero(off)[0])
            raise ValueError(
                f"query {i} at (x, y) = ({q[i, 1].item()}, {q[i, 2].item()}) is off the image; x must lie in "
                f"[0, {w - 1}] and y in [0, {h - 1}] (pixel centres at integers)"
            )
        sx, sy = (mw - 1) / max(w - 1, 1), (mh - 1) / max(h - 1, 1)
        q[:, 1] *= sx
        q[:, 2] *= sy
        chunk = chunk or self._tracks_per_chunk()
        xy, dep, vis, conf = self._run_sparse(v, d, q, iters, chunk)
        qt = q[:, 0].round().long()
        if backward and (qt > 0).any():
            qb = q.clone()
            qb[:, 0] = (t - 1) - q[:, 0]
            bxy, bdep, bvis, bconf = self._run_sparse(v.flip(1), d.flip(1), qb, iters, chunk)
            before = torch.arange(t, device=q.device)[:, None] < qt[None, :]
            xy = torch.where(before[..., None], bxy.flip(0), xy)
            dep, vis, conf = (torch.where(before, b.flip(0), f) for b, f in ((bdep, dep), (bvis, vis), (bconf, conf)))
        xy = xy.clone()
        xy[..., 0] /= sx
        xy[..., 1] /= sy
        K = torch.as_tensor(as_intrinsics_matrix(intrinsics, h, w), dtype=torch.float32)
        xy, dep = xy.float().cpu(), dep.float().cpu()
        vis_prob = torch.sigmoid(vis).float().cpu()
        thr = self.cfg.vis_threshold if vis_threshold is None else vis_threshold
        return SparseTracks(
            uvd=torch.cat([xy, dep[..., None]], -1),
            xyz=uvd_to_xyz(xy, dep, K),
            visibility=vis_prob > thr,
            vis_prob=vis_prob,
            confidence=torch.sigmoid(conf).float().cpu(),
        )


def _progress_fn(enabled: bool):
    if not enabled:
        return None
    from iclr25.shared import progress

    return progress


def _resize_dense(uv, dep, vis, conf, model_hw, out_hw):
    """Resample dense fields from the model resolution to the input resolution (align-corners bilinear)."""
    (mh, mw), (h, w) = model_hw, out_hw
    sx, sy = (w - 1) / max(mw - 1, 1), (h - 1) / max(mh - 1, 1)

    def rs(x):  # [T, mh, mw, C] -> [T, h, w, C]
        return F.interpolate(x.permute(0, 3, 1, 2), (h, w), mode="bilinear", align_corners=True).permute(0, 2, 3, 1)

    uv = rs(uv) * uv.new_tensor([sx, sy])
    return uv, rs(dep[..., None])[..., 0], rs(vis[..., None])[..., 0], rs(conf[..., None])[..., 0]
