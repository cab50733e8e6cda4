"""NeRF-synthetic / Blender ``transforms_{train,test}.json`` datasets (camera-to-world in OpenGL axes)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

from iclr25.shared import atomic_write

from ..camera import Camera, focal_from_fov, intrinsics
from .scene import Scene, load_image, save_image

_GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])  # flip y and z: OpenGL/Blender camera -> OpenCV camera


def _read_split(root: Path, split: str, ext: str):
    path = root / f"transforms_{split}.json"
    if not path.exists():
        return [], []
    meta = json.loads(path.read_text())
    if "camera_angle_x" not in meta or "frames" not in meta:
        raise ValueError(f"{path}: expected keys 'camera_angle_x' and 'frames'")
    cams, imgs = [], []
    for fr in meta["frames"]:
        img_path = root / (fr["file_path"] + ("" if Path(fr["file_path"]).suffix else ext))
        img = load_image(img_path)
        h, w = img.shape[:2]
        f = focal_from_fov(float(meta["camera_angle_x"]), w)
        c2w = np.asarray(fr["transform_matrix"], dtype=np.float64) @ _GL_TO_CV
        cams.append(Camera(torch.tensor(np.linalg.inv(c2w), dtype=torch.float32), intrinsics(f, f, w / 2, h / 2),
                           w, h, Path(fr["file_path"]).name))  # fmt: skip
        imgs.append(img)
    return cams, imgs


def load_blender_scene(root, points_path=None, n_random_points: int = 100_000, seed: int = 0, ext: str = ".png"):
    """Load ``transforms_train.json`` / ``transforms_test.json``. Initial points: ``points_path`` (PLY / NPY) when
    given, otherwise 3DGS's random init (100k points uniform in [-1.3, 1.3]^3, random colours)."""
    root = Path(root)
    tr_c, tr_i = _read_split(root, "train", ext)
    te_c, te_i = _read_split(root, "test", ext)
    if not tr_c:
        raise FileNotFoundError(f"no transforms_train.json (or no frames) in {root}")
    if points_path is not None:
        from .ply import load_point_cloud

        pts, cols = load_point_cloud(points_path)
    else:
        rng = np.random.default_rng(seed)
        pts = rng.uniform(-1.3, 1.3, (n_random_points, 3)).astype(np.float32)
        cols = rng.uniform(0, 1, (n_random_points, 3)).astype(np.float32)
    n = len(tr_c)
    return Scene(tr_c + te_c, tr_i + te_i, pts, cols, list(range(n)), list(range(n, n + len(te_c))))


def save_blender_scene(scene: Scene, root) -> None:
    """Write ``scene`` as a Blender dataset (``train/``, ``test/`` PNGs and the two transforms files)."""
    root = Path(root)
    for split, idx in (("train", scene.train_idx), ("test", scene.test_idx)):
        (root / split).mkdir(parents=True, exist_ok=True)
        frames = []
        for j, i in enumerate(idx):
            cam = scene.cameras[i]
            if abs(float(cam.K[0, 0]) - float(cam.K[1, 1])) > 1e-3 * float(cam.K[0, 0]):
                raise ValueError("Blender format needs square pixels (fx == fy)")
            c2w = np.linalg.inv(cam.viewmat.double().numpy()) @ _GL_TO_CV
            save_image(root / split / f"r_{j}.png", scene.images[i])
            frames.append({"file_path": f"./{split}/r_{j}", "transform_matrix": c2w.tolist()})
        cam0 = scene.cameras[idx[0]] if idx else scene.cameras[0]
        fov = 2 * math.atan(0.5 * cam0.width / float(cam0.K[0, 0]))
        with atomic_write(root / f"transforms_{split}.json", "w") as f:
            json.dump({"camera_angle_x": fov, "frames": frames}, f, indent=1)
