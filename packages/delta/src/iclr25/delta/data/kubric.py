"""Kubric-style dense 3D annotations (the layout DELTA's ``kubric_dataset.py`` reads), writer and loader.

``{root}/{seq}/frames/{t:03d}.png`` RGB frames; ``{root}/{seq}/depths/{t:03d}.png`` 16-bit depth quantised over
``depth_range`` (d = lo + v / 65535 * (hi - lo)); ``{root}/{seq}/{seq}_dense.npy`` a pickled dict with ``coords``
[T, H, W, 2] (pixel track of every frame-0 pixel), ``reproj_depth`` [T, H, W] (track depth), ``visibility``
[T, H, W] bool, ``queries`` [H*W, 3] (t, x, y), ``depth_range`` [2] and (ours, optional) ``intrinsics`` [4].
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import cv2
import numpy as np

from iclr25.shared import atomic_write


@dataclass
class KubricDenseSample:
    video: np.ndarray  # uint8 [T, 3, H, W]
    depth: np.ndarray  # [T, H, W] metres (de-quantised)
    coords: np.ndarray  # [T, H, W, 2]
    reproj_depth: np.ndarray  # [T, H, W]
    visibility: np.ndarray  # bool [T, H, W]
    queries: np.ndarray  # [H*W, 3]
    intrinsics: np.ndarray | None = None  # (fx, fy, cx, cy) if stored


def _write_png(path: str, img: np.ndarray) -> None:
    ok, buf = cv2.imencode(".png", img)
    if not ok:
        raise ValueError(f"PNG encoding failed for {path}")
    with atomic_write(path, "wb") as f:
        f.write(buf.tobytes())


def write_kubric_dense(root, seq: str, clip) -> str:
    d = os.path.join(root, seq)
    os.makedirs(os.path.join(d, "frames"), exist_ok=True)
    os.makedirs(os.path.join(d, "depths"), exist_ok=True)
    lo, hi = float(clip.depth.min()), float(clip.depth.max())
    hi = hi if hi > lo else lo + 1.0
    for t in range(clip.num_frames):
        _write_png(os.path.join(d, "frames", f"{t:03d}.png"), clip.video[t].transpose(1, 2, 0)[..., ::-1])
        q = np.round((clip.depth[t] - lo) / (hi - lo) * 65535).astype(np.uint16)
        _write_png(os.path.join(d, "depths", f"{t:03d}.png"), q)
    h, w = clip.depth.shape[1:]
    yy, xx = np.mgrid[0:h, 0:w]
    ann = dict(
        coords=clip.tracks_uv.astype(np.float32),
        reproj_depth=clip.tracks_xyz[..., 2].astype(np.float32),
        visibility=clip.visibility,
        queries=np.stack([np.zeros(h * w), xx.ravel(), yy.ravel()], 1).astype(np.float32),
        depth_range=np.array([lo, hi], np.float32),
        intrinsics=np.array(clip.intrinsics, np.float32),
    )
    path = os.path.join(d, f"{seq}_dense.npy")
    with atomic_write(path, "wb") as f:
        np.save(f, ann, allow_pickle=True)
    return d


def load_kubric_dense(root, seq: str) -> KubricDenseSample:
    d = os.path.join(root, seq)
    ann_path = os.path.join(d, f"{seq}_dense.npy")
    if not os.path.isfile(ann_path):
        raise ValueError(f"Kubric annotation not found: {ann_path}")
    ann = np.load(ann_path, allow_pickle=True).item()
    missing = [k for k in ("coords", "reproj_depth", "visibility", "queries", "depth_range") if k not in ann]
    if missing:
        raise ValueError(f"{ann_path}: missing keys {missing}")
    t = ann["coords"].shape[0]
    frames, depths = [], []
    lo, hi = (float(x) for x in ann["depth_range"])
    for i in range(t):
        img = cv2.imread(os.path.join(d, "frames", f"{i:03d}.png"), cv2.IMREAD_COLOR)
        dep = cv2.imread(os.path.join(d, "depths", f"{i:03d}.png"), cv2.IMREAD_UNCHANGED)
        if img is None or dep is None or dep.dtype != np.uint16:
            raise ValueError(f"{d}: frame {i} or its 16-bit depth PNG is missing or unreadable")
        frames.append(img[..., ::-1].transpose(2, 0, 1))
        depths.append(lo + dep.astype(np.float64) / 65535.0 * (hi - lo))
    video, depth = np.stack(frames), np.stack(depths)
    if ann["visibility"].shape != (t, *depth.shape[1:]):
        raise ValueError(f"{d}: visibility shape {ann['visibility'].shape} does not match frames {depth.shape}")
    return KubricDenseSample(
        video, depth, ann["coords"], ann["reproj_depth"], ann["visibility"].astype(bool), ann["queries"],
        ann.get("intrinsics"),
    )  # fmt: skip
