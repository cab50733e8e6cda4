"""Evaluation: dense synthetic clips (DELTA and baselines) and users' copies of TAP-Vid-3D / Kubric / CVO."""

from __future__ import annotations

import glob
import os

import numpy as np

from .geometry import uvd_to_xyz
from .metrics import average_over_videos, cvo_metrics, dense_3d_metrics, tapvid3d_metrics

WEIGHTS = os.path.join(os.path.dirname(__file__), "weights", "delta_micro_synthetic.pt")


def evaluate_dense_prediction(uv, depth, visibility, clip) -> dict:
    """APD3D / AJ3D / OA (TAP-Vid-3D definitions, median scaling, every frame-0 pixel) and 2D EPE on visible points
    of frames 1..T-1 for a dense prediction of a ``SyntheticClip`` (uv [T,H,W,2], depth [T,H,W], visibility)."""
    uv, depth, visibility = (np.asarray(x) for x in (uv, depth, visibility))
    h, w = clip.depth.shape[1:]
    xyz = uvd_to_xyz(uv.astype(np.float64), depth.astype(np.float64), clip.K)
    m = dense_3d_metrics(clip.visibility, clip.tracks_xyz, visibility, xyz, clip.intrinsics, (h, w), scaling="median")
    vis = clip.visibility[1:]
    epe = np.linalg.norm(uv[1:] - clip.tracks_uv[1:], axis=-1)[vis].mean()
    return {
        "apd3d": m["average_pts_within_thresh"],
        "aj3d": m["average_jaccard"],
        "oa": m["occlusion_accuracy"],
        "epe2d": float(epe),
    }


def _tracker(checkpoint):
    from .tracker import DeltaTracker

    if not checkpoint:
        raise ValueError(
            "evaluation needs an explicit checkpoint (ours or an official DELTA state dict); it never picks a model "
            "for you"
        )
    path = checkpoint
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint not found: {path}")
    return DeltaTracker.from_checkpoint(path)


def _files(path: str, pattern: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    files = sorted(glob.glob(os.path.join(path, pattern)))
    if not files:
        raise ValueError(f"no {pattern} files under {path}")
    return files


def evaluate_dataset(dataset: str, path: str, checkpoint: str, limit=None, iters=None) -> dict:
    """Per-video metrics averaged over videos, for the model in ``checkpoint`` (required; reported as "model"). Depth must be stored with the data (``depth`` key / depth PNGs):
    this package ships no monocular depth model (see ``depth.TransformersDepth`` to produce one)."""
    tracker = _tracker(checkpoint)
    per_video = []
    if dataset == "tapvid3d":
        from .data.tapvid3d import load_tapvid3d_npz

        for f in _files(path, "*.npz")[:limit]:
            s = load_tapvid3d_npz(f)
            if s.depth is None:
                raise ValueError(f"{f} has no 'depth' key: add metric depth maps [T, H, W] to evaluate")
            res = tracker.track_points(s.video, s.depth, s.queries_txy, intrinsics=s.intrinsics, iters=iters,
                                       vis_threshold=tracker.cfg.eval_vis_threshold)  # fmt: skip
            h, w = s.video.shape[2:]
            qp = s.queries_xyt[:, [2, 1, 0]]  # (t, y, x)
            per_video.append(
                tapvid3d_metrics(
                    ~s.visibility.T,
                    s.tracks_xyz.transpose(1, 0, 2),
                    ~res.visibility.numpy().T,
                    res.xyz.numpy().transpose(1, 0, 2),
                    s.intrinsics,
                    image_size=(h, w),
                    query_points=qp,
                )  # fmt: skip
            )
    elif dataset == "kubric":
        from .data.kubric import load_kubric_dense
        from .geometry import default_intrinsics

        seqs = sorted(d for d in os.listdir(path) if os.path.isfile(os.path.join(path, d, f"{d}_dense.npy")))
        if not seqs:
            raise ValueError(f"no Kubric sequences (<seq>/<seq>_dense.npy) under {path}")
        for seq in seqs[:limit]:
            s = load_kubric_dense(path, seq)
            h, w = s.depth.shape[1:]
            k = s.intrinsics
            if k is None:
                kk = default_intrinsics(h, w)
                k = (kk[0, 0], kk[1, 1], kk[0, 2], kk[1, 2])
            res = tracker.track(s.video, s.depth, intrinsics=k, iters=iters)
            gt_xyz = uvd_to_xyz(s.coords.astype(np.float64), s.reproj_depth.astype(np.float64),
                                np.array([[k[0], 0, k[2]], [0, k[1], k[3]], [0, 0, 1]]))  # fmt: skip
            per_video.append(dense_3d_metrics(s.visibility, gt_xyz, res.visibility.numpy(), res.xyz.numpy(), k, (h, w)))
    elif dataset == "cvo":
        from .data.cvo import load_cvo_npz

        for f in _files(path, "*.npz")[:limit]:
            s = load_cvo_npz(f)
            res = tracker.track(s["video"], s["depth"], iters=iters)
            h, w = s["flow"].shape[:2]
            yy, xx = np.mgrid[0:h, 0:w]
            pred_flow = res.uv[-1].numpy() - np.stack([xx, yy], -1)
            per_video.append(cvo_metrics(pred_flow, s["flow"], s["occlusion"], res.vis_prob[-1].numpy()))
    else:
        raise ValueError(f"unknown dataset {dataset!r}: expected tapvid3d, kubric or cvo")
    out = average_over_videos(per_video)
    out["num_videos"] = len(per_video)
    out["model"] = os.path.abspath(checkpoint)
    return out
