"""COLMAP sparse models (text and binary): read and write cameras, images and points3D; load a Scene.

Only pinhole models are accepted (SIMPLE_PINHOLE, PINHOLE), as in 3DGS's ``dataset_readers``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from iclr25.shared import atomic_write

from ..camera import Camera, intrinsics
from .scene import Scene, llff_split, load_image, save_image

MODELS = {0: ("SIMPLE_PINHOLE", 3), 1: ("PINHOLE", 4)}
MODEL_IDS = {name: (mid, n) for mid, (name, n) in MODELS.items()}


@dataclass
class ColmapCamera:
    id: int
    model: str
    width: int
    height: int
    params: tuple

    def K(self) -> torch.Tensor:
        if self.model == "SIMPLE_PINHOLE":
            f, cx, cy = self.params
            return intrinsics(f, f, cx, cy)
        fx, fy, cx, cy = self.params
        return intrinsics(fx, fy, cx, cy)


@dataclass
class ColmapImage:
    id: int
    qvec: np.ndarray  # (w, x, y, z) world-to-camera rotation
    tvec: np.ndarray
    camera_id: int
    name: str

    def viewmat(self) -> torch.Tensor:
        from ..projection import quat_to_rotmat

        m = torch.eye(4, dtype=torch.float64)
        m[:3, :3] = quat_to_rotmat(torch.tensor(self.qvec, dtype=torch.float64)[None])[0]
        m[:3, 3] = torch.tensor(self.tvec, dtype=torch.float64)
        return m.float()


def rotmat_to_qvec(R: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z), w >= 0, of a rotation matrix (Shepperd's method via the symmetric K matrix)."""
    R = np.asarray(R, dtype=np.float64)
    Kq = (
        np.array(
            [
                [R[0, 0] - R[1, 1] - R[2, 2], 0, 0, 0],
                [R[1, 0] + R[0, 1], R[1, 1] - R[0, 0] - R[2, 2], 0, 0],
                [R[2, 0] + R[0, 2], R[2, 1] + R[1, 2], R[2, 2] - R[0, 0] - R[1, 1], 0],
                [R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1], R[0, 0] + R[1, 1] + R[2, 2]],
            ]
        )
        / 3.0
    )
    vals, vecs = np.linalg.eigh(Kq)
    q = vecs[[3, 0, 1, 2], np.argmax(vals)]
    return -q if q[0] < 0 else q


def _check(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise ValueError(f"malformed COLMAP file {path}: {what}")


# ---------------------------------------------------------------------------------------------------- text format
def read_cameras_text(path) -> dict[int, ColmapCamera]:
    path, cams = Path(path), {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        el = line.split()
        _check(len(el) >= 5, path, f"camera line too short: {line!r}")
        model = el[1]
        if model not in MODEL_IDS:
            raise ValueError(f"{path}: camera model {model} is not supported (only SIMPLE_PINHOLE and PINHOLE)")
        params = tuple(float(x) for x in el[4:])
        _check(len(params) == MODEL_IDS[model][1], path, f"{model} needs {MODEL_IDS[model][1]} params")
        cams[int(el[0])] = ColmapCamera(int(el[0]), model, int(el[2]), int(el[3]), params)
    return cams


def read_images_text(path) -> dict[int, ColmapImage]:
    path, images = Path(path), {}
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    # each image takes two lines (the second lists 2D points, possibly empty)
    for i in range(0, len(lines) - 1 + 1, 2):
        if not lines[i].strip():
            continue
        el = lines[i].split()
        _check(len(el) >= 10, path, f"image line too short: {lines[i]!r}")
        img = ColmapImage(int(el[0]), np.array(el[1:5], float), np.array(el[5:8], float), int(el[8]), " ".join(el[9:]))
        images[img.id] = img
    return images


def read_points3d_text(path) -> tuple[np.ndarray, np.ndarray]:
    path, xyz, rgb = Path(path), [], []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        el = line.split()
        _check(len(el) >= 8, path, f"point line too short: {line!r}")
        xyz.append([float(x) for x in el[1:4]])
        rgb.append([int(x) for x in el[4:7]])
    return np.array(xyz, np.float64).reshape(-1, 3), np.array(rgb, np.uint8).reshape(-1, 3)


def write_colmap_text(folder, cams, images, xyz, rgb) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_write(folder / "cameras.txt", "w") as f:
        f.write("# Camera list: CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n")
        for c in cams.values():
            f.write(f"{c.id} {c.model} {c.width} {c.height} {' '.join(repr(float(p)) for p in c.params)}\n")
    with atomic_write(folder / "images.txt", "w") as f:
        f.write("# IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n# POINTS2D[] as (X, Y, POINT3D_ID)\n")
        for im in images.values():
            vals = " ".join(repr(float(v)) for v in (*im.qvec, *im.tvec))
            f.write(f"{im.id} {vals} {im.camera_id} {im.name}\n\n")
    with atomic_write(folder / "points3D.txt", "w") as f:
        f.write("# POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[] as (IMAGE_ID, POINT2D_IDX)\n")
        for i, (p, c) in enumerate(zip(xyz, rgb)):
            f.write(
                f"{i + 1} {float(p[0])!r} {float(p[1])!r} {float(p[2])!r} {int(c[0])} {int(c[1])} {int(c[2])} 0.0\n"
            )


# -------------------------------------------------------------------------------------------------- binary format
class _Reader:
    def __init__(self, path):
        self.path = Path(path)
        self.buf = self.path.read_bytes()
        self.pos = 0

    def read(self, fmt):
        size = struct.calcsize("<" + fmt)
        _check(self.pos + size <= len(self.buf), self.path, "truncated")
        out = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += size
        return out

    def read_cstr(self):
        end = self.buf.find(b"\x00", self.pos)
        _check(end >= 0, self.path, "unterminated image name")
        s = self.buf[self.pos : end].decode()
        self.pos = end + 1
        return s


def read_cameras_binary(path) -> dict[int, ColmapCamera]:
    r, cams = _Reader(path), {}
    for _ in range(r.read("Q")[0]):
        cid, mid, w, h = r.read("iiQQ")
        if mid not in MODELS:
            raise ValueError(f"{path}: camera model id {mid} is not supported (only SIMPLE_PINHOLE and PINHOLE)")
        name, n = MODELS[mid]
        cams[cid] = ColmapCamera(cid, name, w, h, r.read("d" * n))
    return cams


def read_images_binary(path) -> dict[int, ColmapImage]:
    r, images = _Reader(path), {}
    for _ in range(r.read("Q")[0]):
        iid, *vals, cid = r.read("idddddddi")
        name = r.read_cstr()
        n2d = r.read("Q")[0]
        r.read("ddq" * n2d)
        images[iid] = ColmapImage(iid, np.array(vals[:4]), np.array(vals[4:]), cid, name)
    return images


def read_points3d_binary(path) -> tuple[np.ndarray, np.ndarray]:
    r, xyz, rgb = _Reader(path), [], []
    for _ in range(r.read("Q")[0]):
        _, x, y, z, cr, cg, cb, _err = r.read("QdddBBBd")
        r.read("ii" * r.read("Q")[0])
        xyz.append((x, y, z))
        rgb.append((cr, cg, cb))
    return np.array(xyz, np.float64).reshape(-1, 3), np.array(rgb, np.uint8).reshape(-1, 3)


def write_colmap_binary(folder, cams, images, xyz, rgb) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_write(folder / "cameras.bin") as f:
        f.write(struct.pack("<Q", len(cams)))
        for c in cams.values():
            f.write(struct.pack("<iiQQ", c.id, MODEL_IDS[c.model][0], c.width, c.height))
            f.write(struct.pack("<" + "d" * len(c.params), *c.params))
    with atomic_write(folder / "images.bin") as f:
        f.write(struct.pack("<Q", len(images)))
        for im in images.values():
            f.write(struct.pack("<idddddddi", im.id, *im.qvec, *im.tvec, im.camera_id))
            f.write(im.name.encode() + b"\x00" + struct.pack("<Q", 0))
    with atomic_write(folder / "points3D.bin") as f:
        f.write(struct.pack("<Q", len(xyz)))
        for i, (p, c) in enumerate(zip(xyz, rgb)):
            f.write(struct.pack("<QdddBBBdQ", i + 1, *map(float, p), *map(int, c), 0.0, 0))


# ------------------------------------------------------------------------------------------------------ scene I/O
def read_colmap_model(sparse_dir):
    """(cameras, images, xyz, rgb) from ``sparse_dir`` holding either the .bin or the .txt files."""
    d = Path(sparse_dir)
    if (d / "cameras.bin").exists():
        return (read_cameras_binary(d / "cameras.bin"), read_images_binary(d / "images.bin"),
                *read_points3d_binary(d / "points3D.bin"))  # fmt: skip
    if (d / "cameras.txt").exists():
        return (read_cameras_text(d / "cameras.txt"), read_images_text(d / "images.txt"),
                *read_points3d_text(d / "points3D.txt"))  # fmt: skip
    raise FileNotFoundError(f"no COLMAP model (cameras.bin or cameras.txt) in {d}")


def load_colmap_scene(root, images_dir: str = "images", llffhold: int = 8, eval_split: bool = True) -> Scene:
    """3DGS-style COLMAP scene: ``root/sparse/0`` (or ``root/sparse``) plus ``root/images_dir``; images sorted by
    name; every ``llffhold``-th image is a test view when ``eval_split``."""
    root = Path(root)
    sparse = root / "sparse" / "0" if (root / "sparse" / "0").is_dir() else root / "sparse"
    cams, images, xyz, rgb = read_colmap_model(sparse)
    cameras, imgs = [], []
    for im in sorted(images.values(), key=lambda x: x.name):
        if im.camera_id not in cams:
            raise ValueError(f"image {im.name} refers to camera {im.camera_id}, which is not in the model")
        c = cams[im.camera_id]
        img = load_image(root / images_dir / im.name)
        if img.shape[:2] != (c.height, c.width):  # downscaled image folders (images_2, images_4)
            factor = img.shape[1] / c.width
            cam = Camera(im.viewmat(), c.K(), c.width, c.height, im.name).scaled(factor)
        else:
            cam = Camera(im.viewmat(), c.K(), c.width, c.height, im.name)
        cameras.append(cam)
        imgs.append(img)
    train, test = llff_split(len(cameras), llffhold) if eval_split else (list(range(len(cameras))), [])
    return Scene(cameras, imgs, xyz.astype(np.float32), rgb.astype(np.float32) / 255.0, train, test)


def save_colmap_scene(scene: Scene, root, binary: bool = False) -> None:
    """Write ``scene`` as a COLMAP dataset: ``root/images/*.png`` and ``root/sparse/0`` (text or binary)."""
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    cams, images = {}, {}
    for i, (cam, img) in enumerate(zip(scene.cameras, scene.images)):
        K = cam.K.double()
        cams[i + 1] = ColmapCamera(i + 1, "PINHOLE", cam.width, cam.height,
                                   tuple(float(v) for v in (K[0, 0], K[1, 1], K[0, 2], K[1, 2])))  # fmt: skip
        name = f"{cam.name or f'view_{i:03d}'}.png"
        vm = cam.viewmat.double().numpy()
        images[i + 1] = ColmapImage(i + 1, rotmat_to_qvec(vm[:3, :3]), vm[:3, 3].copy(), i + 1, name)
        save_image(root / "images" / name, img)
    rgb = np.clip(np.round(scene.colors * 255), 0, 255).astype(np.uint8)
    writer = write_colmap_binary if binary else write_colmap_text
    writer(root / "sparse" / "0", cams, images, scene.points.astype(np.float64), rgb)
