"""A synthetic multi-view scene with independent ground truth.

Analytic textured primitives (a ground plane, two spheres, a box) are ray-cast in numpy with supersampling; textures
are images shipped by scikit-image. Shading is Lambertian plus a Blinn-Phong highlight on the spheres (so the colour is
view dependent and SH degrees matter). The initial point cloud samples the true surfaces (a stand-in for COLMAP /
nerfacto points). Nothing here uses the Gaussian rasterizer, so fitting it is not an "inverse crime".
"""

from __future__ import annotations

import numpy as np
import torch

from ..camera import orbit_cameras
from .scene import Scene

LIGHT = np.array([0.4, 0.3, 1.0]) / np.linalg.norm([0.4, 0.3, 1.0])
INF = np.inf


def _textures() -> dict:
    import skimage.data as skd

    def gray(img, tint):
        return (img.astype(np.float32) / 255.0)[..., None] * np.asarray(tint, np.float32)

    return {
        "ground": gray(skd.gravel(), (0.75, 0.7, 0.6)),
        "astronaut": skd.astronaut().astype(np.float32) / 255.0,
        "coffee": skd.coffee().astype(np.float32) / 255.0,
        "brick": gray(skd.brick(), (0.95, 0.45, 0.35)),
    }


def _bilinear(tex: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Bilinear, wrapping lookup of tex [h, w, 3] at texture coordinates u, v (periodic with period 1)."""
    h, w = tex.shape[:2]
    x = (u % 1.0) * w - 0.5
    y = (v % 1.0) * h - 0.5
    x0, y0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    x0, y0, x1, y1 = x0 % w, y0 % h, (x0 + 1) % w, (y0 + 1) % h
    return (tex[y0, x0] * (1 - fx) * (1 - fy) + tex[y0, x1] * fx * (1 - fy) + tex[y1, x0] * (1 - fx) * fy
            + tex[y1, x1] * fx * fy)  # fmt: skip


class _Plane:
    def __init__(self, half, tex, uv_scale=1.5):
        self.half, self.tex, self.uv_scale, self.specular = half, tex, uv_scale, 0.0

    def intersect(self, o, d):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = -o[:, 2] / d[:, 2]
        p = o + t[:, None] * d
        hit = (t > 1e-6) & (np.abs(p[:, 0]) <= self.half) & (np.abs(p[:, 1]) <= self.half)
        return np.where(hit, t, INF), np.tile([0.0, 0.0, 1.0], (len(o), 1))

    def albedo(self, p, n, tex):
        return _bilinear(
            tex[self.tex], p[:, 0] / (2 * self.half) * self.uv_scale, p[:, 1] / (2 * self.half) * self.uv_scale
        )

    def area(self):
        return (2 * self.half) ** 2

    def sample(self, n, rng):
        p = np.column_stack([rng.uniform(-self.half, self.half, (n, 2)), np.zeros(n)])
        return p, np.tile([0.0, 0.0, 1.0], (n, 1))


class _Sphere:
    def __init__(self, center, radius, tex, specular=0.35):
        self.c, self.r, self.tex, self.specular = np.asarray(center, float), radius, tex, specular

    def intersect(self, o, d):
        oc = o - self.c
        b = np.sum(oc * d, axis=1)
        disc = b * b - (np.sum(oc * oc, axis=1) - self.r**2)
        sq = np.sqrt(np.maximum(disc, 0))
        t = -b - sq
        t = np.where(t > 1e-6, t, -b + sq)
        hit = (disc >= 0) & (t > 1e-6)
        t = np.where(hit, t, INF)
        n = (o + np.where(hit, t, 0)[:, None] * d - self.c) / self.r
        return t, n

    def albedo(self, p, n, tex):
        u = 0.5 + np.arctan2(n[:, 1], n[:, 0]) / (2 * np.pi)
        v = 0.5 - np.arcsin(np.clip(n[:, 2], -1, 1)) / np.pi
        return _bilinear(tex[self.tex], u, v)

    def area(self):
        return 4 * np.pi * self.r**2

    def sample(self, n, rng):
        x = rng.normal(size=(n, 3))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        x[:, 2] = np.abs(x[:, 2]) * np.sign(x[:, 2])
        return self.c + self.r * x, x


class _Box:
    def __init__(self, center, half, tex):
        self.c, self.h, self.tex, self.specular = np.asarray(center, float), np.asarray(half, float), tex, 0.0

    def intersect(self, o, d):
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / d
            t0 = (self.c - self.h - o) * inv
            t1 = (self.c + self.h - o) * inv
        tmin, tmax = np.nanmax(np.minimum(t0, t1), axis=1), np.nanmin(np.maximum(t0, t1), axis=1)
        hit = (tmax >= tmin) & (tmin > 1e-6)
        t = np.where(hit, tmin, INF)
        p = o + np.where(hit, t, 0)[:, None] * d
        q = (p - self.c) / self.h
        axis = np.argmax(np.abs(q), axis=1)
        n = np.zeros_like(p)
        n[np.arange(len(p)), axis] = np.sign(q[np.arange(len(p)), axis])
        return t, n

    def albedo(self, p, n, tex):
        q = (p - self.c) / (2 * self.h) + 0.5
        axis = np.argmax(np.abs(n), axis=1)
        u = np.where(axis == 0, q[:, 1], q[:, 0])
        v = np.where(axis == 2, q[:, 1], q[:, 2])
        return _bilinear(tex[self.tex], u, v)

    def area(self):
        x, y, z = 2 * self.h
        return 2 * (x * y + y * z + x * z)

    def sample(self, n, rng):
        face = rng.integers(0, 6, n)
        q = rng.uniform(-1, 1, (n, 3))
        axis, sign = face // 2, np.where(face % 2 == 0, -1.0, 1.0)
        q[np.arange(n), axis] = sign
        normal = np.zeros((n, 3))
        normal[np.arange(n), axis] = sign
        return self.c + q * self.h, normal


def default_primitives():
    return [
        _Plane(1.6, "ground"),
        _Sphere((0.35, 0.25, 0.4), 0.4, "astronaut"),
        _Sphere((-0.35, 0.55, 0.22), 0.22, "coffee"),
        _Box((-0.35, -0.35, 0.25), (0.25, 0.25, 0.25), "brick"),
    ]


def _shade(prims, idx, p, n, view_d, tex):
    out = np.zeros((len(p), 3))
    for k, prim in enumerate(prims):
        m = idx == k
        if not m.any():
            continue
        alb = prim.albedo(p[m], n[m], tex)
        diffuse = 0.35 + 0.65 * np.clip(n[m] @ LIGHT, 0, None)
        col = alb * diffuse[:, None]
        if prim.specular > 0 and view_d is not None:
            h = LIGHT[None, :] - view_d[m]
            h /= np.linalg.norm(h, axis=1, keepdims=True)
            col = col + prim.specular * np.clip(np.sum(n[m] * h, axis=1), 0, None)[:, None] ** 24
        out[m] = col
    return np.clip(out, 0, 1)


def raycast(prims, origins, dirs, tex) -> np.ndarray:
    """Colour of rays (black where nothing is hit)."""
    best_t = np.full(len(origins), INF)
    best_n = np.zeros((len(origins), 3))
    best_i = np.full(len(origins), -1)
    for k, prim in enumerate(prims):
        t, n = prim.intersect(origins, dirs)
        closer = t < best_t
        best_t, best_i = np.where(closer, t, best_t), np.where(closer, k, best_i)
        best_n[closer] = n[closer]
    p = origins + np.where(np.isfinite(best_t), best_t, 0)[:, None] * dirs
    return _shade(prims, best_i, p, best_n, dirs, tex)


def render_view(cam, prims, tex, supersample: int = 2) -> torch.Tensor:
    R, t = cam.viewmat[:3, :3].double().numpy(), cam.viewmat[:3, 3].double().numpy()
    K = cam.K.double().numpy()
    center = -R.T @ t
    ss = supersample
    off = (np.arange(ss) + 0.5) / ss
    xs = (np.arange(cam.width)[:, None] + off[None, :]).reshape(-1)
    ys = (np.arange(cam.height)[:, None] + off[None, :]).reshape(-1)
    u, v = np.meshgrid(xs, ys)
    d_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], -1).reshape(-1, 3)
    d = d_cam @ R  # camera -> world: R^T d
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    col = raycast(prims, np.broadcast_to(center, d.shape).copy(), d, tex)
    col = col.reshape(cam.height, ss, cam.width, ss, 3).mean(axis=(1, 3))
    return torch.from_numpy(col.astype(np.float32))


def sample_surface_points(prims, tex, n: int, rng, noise: float = 0.0):
    areas = np.array([p.area() for p in prims])
    counts = rng.multinomial(n, areas / areas.sum())
    pts, cols = [], []
    for k, (prim, c) in enumerate(zip(prims, counts)):
        if c == 0:
            continue
        p, nrm = prim.sample(c, rng)
        pts.append(p)
        cols.append(_shade(prims, np.full(c, k), p, nrm, None, tex))
    pts = np.concatenate(pts) + noise * rng.normal(size=(n, 3))
    return pts.astype(np.float32), np.concatenate(cols).astype(np.float32)


def make_synthetic_scene(
    n_views: int = 40,
    width: int = 64,
    height: int = 64,
    n_points: int = 4000,
    radius: float = 3.2,
    supersample: int = 2,
    point_noise: float = 0.01,
    seed: int = 0,
) -> Scene:
    """Ray-traced views on a hemisphere of orbits plus surface-sampled initial points; llffhold=8 split."""
    rng = np.random.default_rng(seed)
    prims, tex = default_primitives(), _textures()
    cams = orbit_cameras(n_views, radius, width, height, fov_deg=45.0, elevations_deg=(20.0, 32.0, 45.0, 58.0))
    images = [render_view(c, prims, tex, supersample) for c in cams]
    pts, cols = sample_surface_points(prims, tex, n_points, rng, point_noise)
    return Scene(cams, images, pts, cols)
