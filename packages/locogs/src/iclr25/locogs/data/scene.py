"""A multi-view scene: cameras, images, an initial point cloud, and the train/test split."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..camera import Camera


@dataclass
class Scene:
    cameras: list[Camera]
    images: list[torch.Tensor]  # each [H, W, 3] float32 in [0, 1]
    points: np.ndarray  # [M, 3] initial point cloud
    colors: np.ndarray  # [M, 3] in [0, 1]
    train_idx: list[int] = field(default_factory=list)
    test_idx: list[int] = field(default_factory=list)

    def __post_init__(self):
        if len(self.cameras) != len(self.images):
            raise ValueError(f"Scene: {len(self.cameras)} cameras but {len(self.images)} images")
        for cam, img in zip(self.cameras, self.images):
            if tuple(img.shape) != (cam.height, cam.width, 3):
                raise ValueError(
                    f"Scene: image {cam.name!r} is {tuple(img.shape)}, camera says {cam.height}x{cam.width}"
                )
        self.points = np.asarray(self.points, dtype=np.float32).reshape(-1, 3)
        self.colors = np.asarray(self.colors, dtype=np.float32).reshape(-1, 3)
        if len(self.points) != len(self.colors):
            raise ValueError("Scene: points and colors differ in length")
        if not self.train_idx and not self.test_idx:
            self.train_idx, self.test_idx = llff_split(len(self.cameras))

    @property
    def extent(self) -> float:
        """3DGS ``getNerfppNorm`` radius: 1.1 x the largest camera distance from the mean camera centre."""
        centers = torch.stack([c.center for c in self.cameras]).double()
        return float(1.1 * (centers - centers.mean(0)).norm(dim=1).max())

    def train(self) -> list[tuple[Camera, torch.Tensor]]:
        return [(self.cameras[i], self.images[i]) for i in self.train_idx]

    def test(self) -> list[tuple[Camera, torch.Tensor]]:
        return [(self.cameras[i], self.images[i]) for i in self.test_idx]


def llff_split(n: int, llffhold: int = 8) -> tuple[list[int], list[int]]:
    """3DGS ``--eval`` split: every ``llffhold``-th image (index % 8 == 0) is a test view."""
    test = [i for i in range(n) if i % llffhold == 0]
    return [i for i in range(n) if i % llffhold != 0], test


def load_image(path) -> torch.Tensor:
    import imageio.v3 as iio

    arr = np.asarray(iio.imread(path))
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=-1)
    if arr.shape[-1] == 4:  # RGBA: composite on black (3DGS default background)
        a = arr[..., 3:4].astype(np.float32) / 255.0
        arr = arr[..., :3].astype(np.float32) / 255.0 * a
        return torch.from_numpy(arr)
    return torch.from_numpy(arr[..., :3].astype(np.float32) / 255.0)


def save_image(path, img) -> None:
    import imageio.v3 as iio

    from iclr25.shared import atomic_write

    arr = img.detach().cpu().clamp(0, 1).numpy() if isinstance(img, torch.Tensor) else np.clip(img, 0, 1)
    with atomic_write(path, "wb") as f:
        iio.imwrite(f, (arr * 255 + 0.5).astype(np.uint8), extension=".png")
