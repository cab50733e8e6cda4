"""Camera geometry: pinhole projection, uvd <-> xyz, default intrinsics, least-squares disparity alignment."""

from __future__ import annotations

import numpy as np
import torch


def default_intrinsics(height: int, width: int) -> np.ndarray:
    """The official fallback K (``convert_trajs_uvd_to_trajs_3d``): fx = fy = W, principal point (W//2, H//2)."""
    return np.array([[width, 0.0, width // 2], [0.0, width, height // 2], [0.0, 0.0, 1.0]], dtype=np.float64)


def as_intrinsics_matrix(intrinsics, height: int, width: int) -> np.ndarray:
    """Accept None, a 3x3 matrix or (fx, fy, cx, cy); return a float64 3x3 matrix."""
    if intrinsics is None:
        return default_intrinsics(height, width)
    k = np.asarray(intrinsics.detach().cpu() if isinstance(intrinsics, torch.Tensor) else intrinsics, np.float64)
    if k.shape == (4,):
        fx, fy, cx, cy = k
        k = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], dtype=np.float64)
    if k.shape != (3, 3) or not np.all(np.isfinite(k)) or k[0, 0] <= 0 or k[1, 1] <= 0:
        raise ValueError(f"intrinsics must be a 3x3 matrix or (fx, fy, cx, cy) with positive focals, got {k!r}")
    return k


def uvd_to_xyz(uv, depth, K):
    """Back-project pixels: xyz = depth * K^-1 [u, v, 1]. Works for numpy arrays and torch tensors (any batch dims)."""
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    x = (uv[..., 0] - cx) / fx * depth
    y = (uv[..., 1] - cy) / fy * depth
    stack = torch.stack if isinstance(uv, torch.Tensor) else np.stack
    return stack([x, y, depth], -1)


def xyz_to_uvd(xyz, K):
    """Project camera-space points: returns (uv [..., 2], depth [...])."""
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    z = xyz[..., 2]
    stack = torch.stack if isinstance(xyz, torch.Tensor) else np.stack
    return stack([fx * xyz[..., 0] / z + cx, fy * xyz[..., 1] / z + cy], -1), z


def align_disparity_lstsq(pred_disparity, ref_depth, mask=None, min_depth: float = 1e-3):
    """Least-squares align a relative disparity map to a metric reference (the official ``least_square_align``).

    Solves min_{s,t} || s * pred + t - 1/ref ||^2 over ``mask`` (default: finite reference deeper than
    ``min_depth``); ``pred_disparity`` and ``ref_depth`` have the same shape. Returns ``(s, t)``; the aligned metric
    depth of any disparity map ``p`` of the same model is ``disparity_to_depth(p, s, t)``.
    """
    pred = np.asarray(pred_disparity, np.float64)
    ref = np.asarray(ref_depth, np.float64)
    if pred.shape != ref.shape:
        raise ValueError(f"pred_disparity shape {pred.shape} must equal ref_depth shape {ref.shape}")
    valid = np.isfinite(ref) & (ref > min_depth) & np.isfinite(pred)
    if mask is not None:
        valid &= np.asarray(mask, bool)
    if valid.sum() < 2:
        raise ValueError("align_disparity_lstsq needs at least 2 valid reference pixels")
    a = np.stack([pred[valid], np.ones(int(valid.sum()))], 1)
    (s, t), *_ = np.linalg.lstsq(a, 1.0 / ref[valid], rcond=None)
    return float(s), float(t)


def disparity_to_depth(pred_disparity, s: float, t: float, max_depth: float = 1e4):
    """Metric depth 1 / (s * disparity + t), with the aligned disparity floored at 1/max_depth."""
    return 1.0 / np.maximum(s * np.asarray(pred_disparity, np.float64) + t, 1.0 / max_depth)
