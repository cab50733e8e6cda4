"""Nearest-neighbour scale initialisation (3DGS ``simple_knn.distCUDA2``)."""

from __future__ import annotations

import numpy as np


def mean_sq_dist_knn(points: np.ndarray, k: int = 3) -> np.ndarray:
    """Mean squared distance to the k nearest other points, clamped at 1e-7 (3DGS create_from_pcd)."""
    from scipy.spatial import cKDTree

    pts = np.asarray(points, dtype=np.float64)
    if len(pts) < 2:
        return np.full(len(pts), 1e-2)
    kk = min(k, len(pts) - 1)
    d, _ = cKDTree(pts).query(pts, k=kk + 1)
    return np.maximum((d[:, 1:] ** 2).mean(axis=1), 1e-7)
