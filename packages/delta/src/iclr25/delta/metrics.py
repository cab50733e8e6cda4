"""Evaluation metrics with tapnet's definitions: TAP-Vid-3D, TAP-Vid (2D), CVO dense flow, dense Kubric-style 3D.

Written from the published definitions (``tapnet/tapvid3d/evaluation/metrics.py`` and
``tapnet/tapvid/evaluation_datasets.py``, Apache-2.0); argument order and key names follow tapnet so numbers can be
compared directly. All thresholds are strict (a point exactly at the threshold is outside).
"""

from __future__ import annotations

import numpy as np

THRESHOLDS = (1, 2, 4, 8, 16)
FIXED_METRIC_THRESHOLDS = {1: 0.01, 2: 0.04, 4: 0.16, 8: 0.64, 16: 2.56}  # metres (use_fixed_metric_threshold)
SCALINGS = ("median", "mean", "none", "per_trajectory", "local_neighborhood", "reproduce_2d", "median_on_queries")


def rescale_intrinsics(intrinsics, image_size) -> np.ndarray:
    """(fx, fy, cx, cy) of an H x W video -> the 256-pixel convention of the TAP-Vid-3D evaluation: x 256/min(H, W)."""
    k = np.asarray(intrinsics, np.float64)
    if k.shape[-1] != 4:
        raise ValueError(f"intrinsics must be (fx, fy, cx, cy), got shape {k.shape}")
    h, w = image_size
    return k * (256.0 / min(h, w))


def _local_tracks(gt_occ, gt_tr, pr_occ, pr_tr, thresh):
    """For every track, the points (any frame) within ``thresh`` of it on the same frame, as one padded 'track'."""
    n = gt_occ.shape[0]
    groups = []
    for i in range(n):
        near = (np.sum(np.square(gt_tr - gt_tr[i : i + 1]), -1) < thresh * thresh).reshape(-1)
        groups.append(near)
    largest = max(int(g.sum()) for g in groups)
    out = [np.zeros((n, largest) + x.shape[2:], x.dtype) for x in (gt_occ, gt_tr, pr_occ, pr_tr)]
    valid = np.zeros((n, largest))
    for i, g in enumerate(groups):
        m = int(g.sum())
        for o, x in zip(out, (gt_occ, gt_tr, pr_occ, pr_tr)):
            o[i, :m] = x.reshape(-1, *x.shape[2:])[g]
        valid[i, :m] = 1.0
    weight = np.sum(1.0 - gt_occ, axis=1, keepdims=True) / np.maximum(
        1.0, np.sum((1.0 - out[0]) * valid, axis=1, keepdims=True)
    )
    return out[0], out[1], out[2], out[3], valid * weight


def tapvid3d_metrics(
    gt_occluded,
    gt_tracks,
    pred_occluded,
    pred_tracks,
    intrinsics,
    image_size=None,
    scaling: str = "median",
    query_points=None,
    use_fixed_metric_threshold: bool = False,
    local_neighborhood_thresh: float = 0.05,
    get_trackwise_metrics: bool = False,
) -> dict:
    """TAP-Vid-3D metrics of one video: occluded [N, T] bool, tracks [N, T, 3] (x, y, z) metres.

    ``intrinsics`` = (fx, fy, cx, cy) of the video; with ``image_size=(H, W)`` they are rescaled by 256/min(H, W)
    first (as the official evaluation does); pass ``image_size=None`` if they already are. ``query_points`` [N, 3]
    (t, y, x) is needed for "per_trajectory", "local_neighborhood" and "median_on_queries". Returns
    ``occlusion_accuracy``, ``pts_within_{1,2,4,8,16}``, ``jaccard_{...}``, ``average_pts_within_thresh`` and
    ``average_jaccard`` (floats, or [N] arrays with ``get_trackwise_metrics``).
    """
    if scaling not in SCALINGS:
        raise ValueError(f"Unknown scaling: {scaling!r}; expected one of {SCALINGS}")
    gt_occ = np.asarray(gt_occluded, bool)
    pr_occ = np.asarray(pred_occluded, bool)
    gt_tr = np.asarray(gt_tracks, np.float64)
    pr_tr = np.asarray(pred_tracks, np.float64)
    if (
        gt_occ.ndim != 2
        or gt_tr.shape != gt_occ.shape + (3,)
        or pr_occ.shape != gt_occ.shape
        or pr_tr.shape != gt_tr.shape
    ):
        raise ValueError(
            f"expected occluded [N, T] and tracks [N, T, 3]; got gt_occluded {gt_occ.shape}, gt_tracks {gt_tr.shape}, "
            f"pred_occluded {pr_occ.shape}, pred_tracks {pr_tr.shape}"
        )
    k = np.asarray(intrinsics, np.float64) if image_size is None else rescale_intrinsics(intrinsics, image_size)
    weights = np.ones(gt_occ.shape)
    pr_norm = np.sqrt(np.maximum(1e-12, np.sum(pr_tr**2, -1)))
    gt_norm = np.sqrt(np.maximum(1e-12, np.sum(gt_tr**2, -1)))
    needs_queries = scaling in ("per_trajectory", "local_neighborhood", "median_on_queries")
    if needs_queries and query_points is None:
        raise ValueError(f"scaling={scaling!r} needs query_points [N, 3] (t, y, x)")
    qt = None if query_points is None else np.round(np.asarray(query_points)[:, 0]).astype(np.int64)
    if scaling == "reproduce_2d":
        scale = gt_tr[..., -1:] / pr_tr[..., -1:]
    elif scaling in ("per_trajectory", "local_neighborhood"):
        idx = np.arange(gt_tr.shape[0])
        scale = (np.maximum(gt_tr[idx, qt, -1], 1e-12) / np.maximum(pr_tr[idx, qt, -1], 1e-12))[:, None, None]
        if scaling == "local_neighborhood":
            gt_occ, gt_tr, pr_occ, pr_tr, weights = _local_tracks(
                gt_occ, gt_tr, pr_occ, pr_tr, local_neighborhood_thresh
            )
    else:
        either = gt_occ | pr_occ
        pn = np.where(either, np.nan, pr_norm)
        gn = np.where(either, np.nan, gt_norm)
        with np.errstate(all="ignore"), _quiet_nan_warnings():
            if scaling == "median":
                scale = np.nanmedian(gn) / np.nanmedian(pn)
            elif scaling == "mean":
                scale = np.nanmean(gn) / np.nanmean(pn)
            elif scaling == "none":
                scale = 1.0
            else:  # median_on_queries
                idx = np.arange(pn.shape[0])
                scale = np.nanmedian(gn[idx, qt]) / np.nanmedian(pn[idx, qt])
    pr_tr = pr_tr * scale

    axis = (-1,) if get_trackwise_metrics else (-2, -1)
    out = {"occlusion_accuracy": np.sum((pr_occ == gt_occ) * weights, axis=axis) / np.sum(weights, axis=axis)}
    visible, pred_visible = ~gt_occ, ~pr_occ
    mean_focal = np.sqrt(k[0] * k[1])
    fracs, jaccs = [], []
    for thr in THRESHOLDS:
        tau = FIXED_METRIC_THRESHOLDS[thr] if use_fixed_metric_threshold else thr * gt_tr[..., -1] / mean_focal
        with np.errstate(invalid="ignore"):
            within = np.sum(np.square(pr_tr - gt_tr), -1) < np.square(tau)  # NaN (no scale) -> False
        correct = within & visible
        frac = np.sum(correct * weights, axis=axis) / np.sum(visible * weights, axis=axis)
        tp = np.sum((correct & pred_visible) * weights, axis=axis)
        fp = np.sum(((~visible & pred_visible) | (~within & pred_visible)) * weights, axis=axis)
        jac = tp / (np.sum(visible * weights, axis=axis) + fp)
        out[f"pts_within_{thr}"], out[f"jaccard_{thr}"] = frac, jac
        fracs.append(frac)
        jaccs.append(jac)
    out["average_jaccard"] = np.mean(np.stack(jaccs), 0)
    out["average_pts_within_thresh"] = np.mean(np.stack(fracs), 0)
    return {key: (float(v) if np.ndim(v) == 0 else v) for key, v in out.items()}


class _quiet_nan_warnings:
    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def tapvid2d_metrics(
    query_points, gt_occluded, gt_tracks, pred_occluded, pred_tracks, query_mode: str = "first", image_size=None
) -> dict:
    """TAP-Vid (2D) metrics, tapnet's ``compute_tapvid_metrics``: query_points [B, N, 3] (t, y, x), occluded
    [B, N, T], tracks [B, N, T, 2] (x, y) in 256 x 256 pixels (or give ``image_size=(H, W)`` to rescale to it).

    "first": only frames after the query frame are evaluated; "strided": every frame except the query frame.
    Returns per-video arrays [B] for ``occlusion_accuracy``, ``pts_within_{d}``, ``jaccard_{d}``,
    ``average_jaccard``, ``average_pts_within_thresh``.
    """
    gt_occ, pr_occ = np.asarray(gt_occluded, bool), np.asarray(pred_occluded, bool)
    gt_tr, pr_tr = np.asarray(gt_tracks, np.float64), np.asarray(pred_tracks, np.float64)
    if (
        gt_occ.ndim != 3
        or gt_tr.shape != gt_occ.shape + (2,)
        or pr_tr.shape != gt_tr.shape
        or pr_occ.shape != gt_occ.shape
    ):
        raise ValueError(f"expected occluded [B, N, T] and tracks [B, N, T, 2]; got {gt_occ.shape}, {gt_tr.shape}")
    if image_size is not None:
        h, w = image_size
        s = np.array([256.0 / w, 256.0 / h])
        gt_tr, pr_tr = gt_tr * s, pr_tr * s
    t = gt_occ.shape[2]
    eye = np.eye(t, dtype=np.int32)
    if query_mode == "first":
        eval_frames = np.cumsum(eye, axis=1) - eye  # frames strictly after the query
    elif query_mode == "strided":
        eval_frames = 1 - eye
    else:
        raise ValueError(f"Unknown query_mode {query_mode!r}: expected 'first' or 'strided'")
    qf = np.round(np.asarray(query_points)[..., 0]).astype(np.int32)
    evaluation = eval_frames[qf] > 0  # B N T
    out = {"occlusion_accuracy": np.sum((pr_occ == gt_occ) & evaluation, axis=(1, 2)) / np.sum(evaluation, axis=(1, 2))}
    visible, pred_visible = ~gt_occ, ~pr_occ
    fracs, jaccs = [], []
    for thr in THRESHOLDS:
        within = np.sum(np.square(pr_tr - gt_tr), -1) < thr * thr
        correct = within & visible
        n_vis = np.sum(visible & evaluation, axis=(1, 2))
        frac = np.sum(correct & evaluation, axis=(1, 2)) / n_vis
        tp = np.sum(correct & pred_visible & evaluation, axis=(1, 2))
        fp = np.sum(((~visible & pred_visible) | (~within & pred_visible)) & evaluation, axis=(1, 2))
        jac = tp / (n_vis + fp)
        out[f"pts_within_{thr}"], out[f"jaccard_{thr}"] = frac, jac
        fracs.append(frac)
        jaccs.append(jac)
    out["average_jaccard"] = np.mean(np.stack(jaccs, 1), 1)
    out["average_pts_within_thresh"] = np.mean(np.stack(fracs, 1), 1)
    return out


def cvo_metrics(pred_flow, gt_flow, gt_occluded, pred_vis_prob=None, vis_threshold: float = 0.9) -> dict:
    """CVO dense-flow metrics of one sample: flows [H, W, 2] (frame 0 -> last), gt_occluded [H, W] bool.

    EPE_all / EPE_vis / EPE_occ: mean end-point error over all, ground-truth visible and occluded pixels (NaN when a
    set is empty). ``occ_iou``: IoU of the occluded masks, a pixel being predicted visible when its probability
    exceeds ``vis_threshold`` (1.0 when both masks are empty).
    """
    pf, gf = np.asarray(pred_flow, np.float64), np.asarray(gt_flow, np.float64)
    occ = np.asarray(gt_occluded, bool)
    if pf.shape != gf.shape or pf.shape[-1] != 2 or occ.shape != gf.shape[:-1]:
        raise ValueError(f"expected flows [H, W, 2] and occlusion [H, W]; got {pf.shape}, {gf.shape}, {occ.shape}")
    epe = np.linalg.norm(pf - gf, axis=-1)
    out = {
        "epe_all": float(epe.mean()),
        "epe_vis": float(epe[~occ].mean()) if (~occ).any() else float("nan"),
        "epe_occ": float(epe[occ].mean()) if occ.any() else float("nan"),
    }
    if pred_vis_prob is not None:
        pred_occ = ~(np.asarray(pred_vis_prob) > vis_threshold)
        union = np.sum(pred_occ | occ)
        out["occ_iou"] = float(np.sum(pred_occ & occ) / union) if union else 1.0
    return out


def dense_3d_metrics(gt_visibility, gt_xyz, pred_visibility, pred_xyz, intrinsics, image_size, scaling="median"):
    """Kubric-style dense 3D evaluation: TAP-Vid-3D metrics over every frame-0 pixel (query frame 0).

    Inputs are dense [T, H, W] visibility and [T, H, W, 3] camera-space tracks."""
    gv, pv = np.asarray(gt_visibility, bool), np.asarray(pred_visibility, bool)
    t = gv.shape[0]
    gx, px = np.asarray(gt_xyz).reshape(t, -1, 3), np.asarray(pred_xyz).reshape(t, -1, 3)
    return tapvid3d_metrics(
        ~gv.reshape(t, -1).T, gx.transpose(1, 0, 2), ~pv.reshape(t, -1).T, px.transpose(1, 0, 2), intrinsics,
        image_size=image_size, scaling=scaling,
    )  # fmt: skip


def average_over_videos(per_video: list[dict]) -> dict:
    """The benchmark number: a plain mean of each per-video metric (as tapnet reports)."""
    if not per_video:
        raise ValueError("no videos to average")
    return {k: float(np.mean([float(np.mean(m[k])) for m in per_video])) for k in per_video[0]}
