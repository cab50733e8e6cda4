"""Baselines: zero motion, OpenCV optical-flow chaining lifted with depth, and DELTA run as per-pixel sparse tracks."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import torch


@dataclass
class BaselineTracks:
    uv: np.ndarray  # [T, H, W, 2]
    depth: np.ndarray  # [T, H, W]
    visibility: np.ndarray  # [T, H, W] bool


def _grid(h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    return np.stack([xx, yy], -1)


def _sample(field: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Bilinear sample of field [H, W(, C)] at pixel positions pos [H, W, 2] (border replicate)."""
    return cv2.remap(
        field.astype(np.float32), pos[..., 0].astype(np.float32), pos[..., 1].astype(np.float32),
        interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE,
    )  # fmt: skip


def zero_motion(video, depth) -> BaselineTracks:
    """Every pixel stays where it is, keeps its frame-0 depth and is always visible."""
    depth = np.asarray(depth, np.float32)
    t, h, w = depth.shape
    uv = np.broadcast_to(_grid(h, w), (t, h, w, 2)).copy()
    return BaselineTracks(uv, np.broadcast_to(depth[0], (t, h, w)).copy(), np.ones((t, h, w), bool))


def _flow_fn(method: str):
    if method == "dis":
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
        return lambda a, b: dis.calc(a, b, None)
    if method == "farneback":
        return lambda a, b: cv2.calcOpticalFlowFarneback(a, b, None, 0.5, 3, 9, 3, 5, 1.1, 0)
    raise ValueError(f"unknown flow method {method!r}: expected 'dis' or 'farneback'")


def flow_chaining(video, depth, method: str = "dis", fb_threshold: float = 1.0) -> BaselineTracks:
    """Chain frame-to-frame OpenCV flow from every frame-0 pixel; depth is read from the depth maps at the chained
    positions (lifting); a point is visible when inside the frame and forward-backward consistent."""
    video = np.asarray(video)
    depth = np.asarray(depth, np.float32)
    if video.dtype != np.uint8:
        video = np.clip(np.round(video), 0, 255).astype(np.uint8)
    t, _, h, w = video.shape
    gray = [cv2.cvtColor(np.ascontiguousarray(f.transpose(1, 2, 0)), cv2.COLOR_RGB2GRAY) for f in video]
    flow = _flow_fn(method)
    pos = _grid(h, w)
    uv, dep, vis = [pos.copy()], [depth[0].copy()], [np.ones((h, w), bool)]
    for i in range(t - 1):
        fw = flow(gray[i], gray[i + 1])
        bw = flow(gray[i + 1], gray[i])
        f = _sample(fw, pos)
        new = pos + f
        b = _sample(bw, new)
        consistent = np.linalg.norm(f + b, axis=-1) < fb_threshold + 0.05 * np.linalg.norm(f, axis=-1)
        inside = (new[..., 0] >= 0) & (new[..., 0] <= w - 1) & (new[..., 1] >= 0) & (new[..., 1] <= h - 1)
        pos = new
        uv.append(pos.copy())
        dep.append(_sample(depth[i + 1], pos))
        vis.append(inside & consistent)
    return BaselineTracks(np.stack(uv), np.stack(dep), np.stack(vis))


def sparse_per_pixel(tracker, video, depth, chunk: int = 256) -> BaselineTracks:
    """The same DELTA model run as sparse tracks on every pixel, ``chunk`` queries per model call (with anchors)."""
    v = np.asarray(video)
    t, _, h, w = v.shape
    g = _grid(h, w).reshape(-1, 2)
    queries = torch.from_numpy(np.concatenate([np.zeros((h * w, 1), np.float32), g], 1))
    res = tracker.track_points(video, depth, queries, backward=False, chunk=chunk)
    return BaselineTracks(
        res.uvd[..., :2].reshape(t, h, w, 2).numpy(), res.uvd[..., 2].reshape(t, h, w).numpy(),
        res.visibility.reshape(t, h, w).numpy(),
    )  # fmt: skip
