"""TAP-Vid-3D ``.npz`` files: writer (from a synthetic clip) and loader.

Layout (the official TAP-Vid-3D release): ``images_jpeg_bytes`` (T encoded JPEG frames), ``queries_xyt`` [N, 3]
(x, y, t), ``tracks_XYZ`` [T, N, 3] camera coordinates in metres, ``visibility`` [T, N] bool, ``fx_fy_cx_cy`` [4].
Depth maps are not part of the release; ``depth`` [T, H, W] is an optional extra key written by our writer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import cv2
import numpy as np

from iclr25.shared import atomic_write

REQUIRED = ("images_jpeg_bytes", "queries_xyt", "tracks_XYZ", "visibility", "fx_fy_cx_cy")


@dataclass
class TapVid3DSample:
    video: np.ndarray  # uint8 [T, 3, H, W]
    queries_xyt: np.ndarray  # [N, 3]
    tracks_xyz: np.ndarray  # [T, N, 3]
    visibility: np.ndarray  # bool [T, N]
    intrinsics: np.ndarray  # (fx, fy, cx, cy)
    depth: np.ndarray | None = None  # [T, H, W] if stored

    @property
    def queries_txy(self) -> np.ndarray:
        """Queries in the tracker's (t, x, y) order."""
        return self.queries_xyt[:, [2, 0, 1]]


def encode_jpeg(frame_chw: np.ndarray, quality: int = 95) -> bytes:
    ok, buf = cv2.imencode(
        ".jpg", np.ascontiguousarray(frame_chw.transpose(1, 2, 0)[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()


def decode_jpeg(data: bytes) -> np.ndarray:
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError("could not decode a JPEG frame")
    return img[..., ::-1].transpose(2, 0, 1).copy()


def write_tapvid3d_npz(path, clip, num_tracks: int = 256, seed: int = 0, query_mode: str = "random", with_depth=True):
    """Write ``clip`` (a ``SyntheticClip``) as a TAP-Vid-3D npz with ``num_tracks`` random ground-truth tracks."""
    q_xyt, xyz, vis = clip.sample_tracks(num_tracks, seed=seed, query_mode=query_mode)
    frames = np.empty(clip.num_frames, dtype=object)
    for t in range(clip.num_frames):
        frames[t] = encode_jpeg(clip.video[t])
    arrays = dict(
        images_jpeg_bytes=frames,
        queries_xyt=q_xyt.astype(np.float32),
        tracks_XYZ=xyz.astype(np.float32),
        visibility=vis,
        fx_fy_cx_cy=np.array(clip.intrinsics, np.float32),
    )
    if with_depth:
        arrays["depth"] = clip.depth.astype(np.float32)
    with atomic_write(path, "wb") as f:
        np.savez(f, **arrays)


def load_tapvid3d_npz(path) -> TapVid3DSample:
    if not os.path.isfile(path):
        raise ValueError(f"TAP-Vid-3D file not found: {path}")
    with np.load(path, allow_pickle=True) as z:
        missing = [k for k in REQUIRED if k not in z.files]
        if missing:
            raise ValueError(f"{path}: missing TAP-Vid-3D keys {missing}; found {z.files}")
        video = np.stack([decode_jpeg(bytes(b)) for b in z["images_jpeg_bytes"]])
        q, xyz, vis, k = z["queries_xyt"], z["tracks_XYZ"], z["visibility"].astype(bool), z["fx_fy_cx_cy"]
        depth = z["depth"] if "depth" in z.files else None
    t = video.shape[0]
    if xyz.shape[0] != t or vis.shape != xyz.shape[:2] or q.shape != (xyz.shape[1], 3) or k.shape != (4,):
        raise ValueError(
            f"{path}: inconsistent shapes: video T={t}, tracks_XYZ {xyz.shape}, visibility {vis.shape}, "
            f"queries_xyt {q.shape}, fx_fy_cx_cy {k.shape}"
        )
    return TapVid3DSample(video, q.astype(np.float64), xyz.astype(np.float64), vis, k.astype(np.float64), depth)
