"""A CVO-style dense-flow sample as a single ``.npz`` (our documented layout; the official CVO release is LMDB).

Keys: ``video`` uint8 [T, 3, H, W], ``depth`` [T, H, W] metres, ``flow`` [H, W, 2] from frame 0 to the last frame,
``occlusion`` [H, W] bool (True where the frame-0 pixel is occluded or outside the last frame).
"""

from __future__ import annotations

import os

import numpy as np

from iclr25.shared import atomic_write

KEYS = ("video", "depth", "flow", "occlusion")


def write_cvo_npz(path, clip) -> None:
    arrays = dict(
        video=clip.video,
        depth=clip.depth.astype(np.float32),
        flow=clip.flow(clip.num_frames - 1).astype(np.float32),
        occlusion=~clip.visibility[-1],
    )
    with atomic_write(path, "wb") as f:
        np.savez(f, **arrays)


def load_cvo_npz(path) -> dict:
    if not os.path.isfile(path):
        raise ValueError(f"CVO file not found: {path}")
    with np.load(path) as z:
        missing = [k for k in KEYS if k not in z.files]
        if missing:
            raise ValueError(f"{path}: missing keys {missing}")
        out = {k: z[k] for k in KEYS}
    t, _, h, w = out["video"].shape
    if out["depth"].shape != (t, h, w) or out["flow"].shape != (h, w, 2) or out["occlusion"].shape != (h, w):
        raise ValueError(f"{path}: inconsistent shapes {[(k, v.shape) for k, v in out.items()]}")
    out["occlusion"] = out["occlusion"].astype(bool)
    return out
