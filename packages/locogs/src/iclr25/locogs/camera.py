"""Pinhole cameras in the gsplat / OpenCV convention.

``viewmat`` is the 4x4 world-to-camera matrix (camera looks down +z, x right, y down) and ``K`` the 3x3 intrinsics;
pixel ``(u, v)`` has its centre at ``(u + 0.5, v + 0.5)`` in the image plane, as in gsplat's ``rasterization``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Camera:
    viewmat: torch.Tensor  # [4, 4] world-to-camera
    K: torch.Tensor  # [3, 3]
    width: int
    height: int
    name: str = ""

    def __post_init__(self):
        self.viewmat = torch.as_tensor(self.viewmat, dtype=torch.float32)
        self.K = torch.as_tensor(self.K, dtype=torch.float32, device=self.viewmat.device)
        if self.viewmat.shape != (4, 4):
            raise ValueError(f"Camera.viewmat must be [4, 4], got {tuple(self.viewmat.shape)}")
        if self.K.shape != (3, 3):
            raise ValueError(f"Camera.K must be [3, 3], got {tuple(self.K.shape)}")
        if int(self.width) < 1 or int(self.height) < 1:
            raise ValueError(f"Camera width/height must be positive, got {self.width}x{self.height}")
        self.width, self.height = int(self.width), int(self.height)

    @property
    def R(self) -> torch.Tensor:
        return self.viewmat[:3, :3]

    @property
    def t(self) -> torch.Tensor:
        return self.viewmat[:3, 3]

    @property
    def center(self) -> torch.Tensor:
        """Camera centre in world coordinates, -R^T t."""
        return -(self.R.T @ self.t)

    def to(self, device) -> Camera:
        return Camera(self.viewmat.to(device), self.K.to(device), self.width, self.height, self.name)

    def scaled(self, factor: float) -> Camera:
        """The same camera at ``factor`` times the resolution (intrinsics scaled accordingly)."""
        K = self.K.clone()
        K[:2] *= factor
        return Camera(self.viewmat.clone(), K, round(self.width * factor), round(self.height * factor), self.name)


def intrinsics(fx: float, fy: float, cx: float, cy: float) -> torch.Tensor:
    return torch.tensor([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], dtype=torch.float32)


def focal_from_fov(fov_rad: float, size: int) -> float:
    return 0.5 * size / math.tan(0.5 * fov_rad)


def look_at(eye, target=(0.0, 0.0, 0.0), up=(0.0, 0.0, 1.0)) -> torch.Tensor:
    """World-to-camera matrix of a camera at ``eye`` looking at ``target`` (OpenCV axes: +z forward, +y down)."""
    eye, target, up = (np.asarray(v, dtype=np.float64) for v in (eye, target, up))
    forward = target - eye
    norm = np.linalg.norm(forward)
    if norm == 0:
        raise ValueError("look_at: eye and target coincide")
    forward /= norm
    right = np.cross(forward, up)
    if np.linalg.norm(right) < 1e-9:  # looking along up: pick another up
        right = np.cross(forward, np.array([0.0, 1.0, 0.0]) if abs(up[1]) < 0.9 else np.array([1.0, 0.0, 0.0]))
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    R = np.stack([right, down, forward])  # rows: camera axes in world coordinates
    viewmat = np.eye(4)
    viewmat[:3, :3] = R
    viewmat[:3, 3] = -R @ eye
    return torch.tensor(viewmat, dtype=torch.float32)


def orbit_cameras(
    n: int,
    radius: float,
    width: int,
    height: int,
    fov_deg: float = 50.0,
    elevations_deg=(15.0, 35.0, 55.0),
    target=(0.0, 0.0, 0.0),
    phase: float = 0.0,
) -> list[Camera]:
    """``n`` cameras on rings of a hemisphere around ``target`` (z up), cycling through ``elevations_deg``."""
    if n < 1:
        raise ValueError(f"orbit_cameras: n must be >= 1, got {n}")
    f = focal_from_fov(math.radians(fov_deg), width)
    K = intrinsics(f, f, width / 2.0, height / 2.0)
    cams = []
    golden = math.pi * (3.0 - math.sqrt(5.0))
    for i in range(n):
        el = math.radians(elevations_deg[i % len(elevations_deg)])
        az = phase + i * golden
        eye = (
            target[0] + radius * math.cos(el) * math.cos(az),
            target[1] + radius * math.cos(el) * math.sin(az),
            target[2] + radius * math.sin(el),
        )
        cams.append(Camera(look_at(eye, target), K.clone(), width, height, name=f"view_{i:03d}"))
    return cams
