"""Synthetic videos with exact dense 3D ground truth: a numpy ray-caster of textured planes, boxes and spheres.

Every object is a primitive in its local frame (sphere of radius r, box of half-extents e, plane z=0 with half-size
(a, b); the background is an unbounded plane) under a rigid motion X = R_t p + c_t with R_t = Rot(axis, w t) R_0 and
c_t = c_0 + v t. Rays are cast through pixel coordinates (pixel centres at integers, K = [[W, 0, W/2], [0, W, H/2]] by
default), so the ray parameter equals camera depth. The frame-0 hit (object, local point p) of every pixel gives its
3D track R_t p + c_t exactly; it is visible at frame t when it projects inside the image and the ray through its
projection hits the same object first at the same depth (relative tolerance 1e-4). Colours are a solid procedural
texture of the local point (constant under motion), rendered with 2x2 supersampling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..geometry import default_intrinsics

SPHERE, BOX, PLANE = 0, 1, 2
VIS_RTOL = 1e-4


def rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues rotation matrix."""
    a = np.asarray(axis, np.float64)
    a = a / np.linalg.norm(a)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


@dataclass
class SceneObject:
    kind: int
    size: np.ndarray  # sphere: [r]; box: half extents [3]; plane: half sizes [a, b] (inf for the background)
    r0: np.ndarray
    axis: np.ndarray
    omega: float  # rad / frame
    c0: np.ndarray
    vel: np.ndarray  # m / frame
    tex_matrix: np.ndarray  # 3 x 3 x n_freq projection for the solid texture
    tex_phase: np.ndarray
    checker: float

    def pose(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        return rotation(self.axis, self.omega * t) @ self.r0, self.c0 + self.vel * t

    def intersect(self, dirs: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """dirs [M, 3] camera rays from the origin (d_z = 1) -> (depth [M] (inf if no hit), local points [M, 3])."""
        r, c = self.pose(t)
        o = -(r.T @ c)  # ray origin in the local frame
        d = dirs @ r  # rows: R^T d
        lam = np.full(dirs.shape[0], np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.kind == SPHERE:
                a = np.einsum("ij,ij->i", d, d)
                b = d @ o
                cc = o @ o - self.size[0] ** 2
                disc = b * b - a * cc
                hit = disc >= 0
                root = (-b - np.sqrt(np.where(hit, disc, 0.0))) / a
                ok = hit & (root > 1e-9)
                lam[ok] = root[ok]
            elif self.kind == BOX:
                e = self.size
                t1 = (-e - o) / d
                t2 = (e - o) / d
                tmin = np.nanmax(np.minimum(t1, t2), axis=1)
                tmax = np.nanmin(np.maximum(t1, t2), axis=1)
                ok = (tmax >= tmin) & (tmin > 1e-9)
                lam[ok] = tmin[ok]
            else:
                root = -o[2] / d[:, 2]
                p = o + root[:, None] * d
                ok = (root > 1e-9) & (np.abs(p[:, 0]) <= self.size[0]) & (np.abs(p[:, 1]) <= self.size[1])
                lam[ok] = root[ok]
        return lam, o + np.where(np.isfinite(lam), lam, 0.0)[:, None] * d

    def color(self, p: np.ndarray) -> np.ndarray:
        """Solid texture of local points [M, 3] -> RGB in [0, 1]."""
        waves = np.sin(np.einsum("mi,ijf->mjf", p, self.tex_matrix) + self.tex_phase).mean(-1)  # M x 3
        cell = np.floor(p / self.checker).sum(1) % 2
        return np.clip(0.5 + 0.35 * waves + 0.15 * (cell[:, None] - 0.5) * 2, 0.0, 1.0)


@dataclass
class SyntheticClip:
    """One rendered clip. Dense tracks start at every frame-0 pixel (x, y) = (column, row)."""

    video: np.ndarray  # uint8 [T, 3, H, W]
    depth: np.ndarray  # float32 [T, H, W] metres (ray-cast at pixel centres)
    tracks_uv: np.ndarray  # float64 [T, H, W, 2]
    tracks_xyz: np.ndarray  # float64 [T, H, W, 3] camera coordinates
    visibility: np.ndarray  # bool [T, H, W]
    K: np.ndarray  # float64 [3, 3]
    object_id: np.ndarray  # int [H, W] frame-0 object of every pixel

    @property
    def num_frames(self) -> int:
        return self.video.shape[0]

    @property
    def intrinsics(self) -> tuple[float, float, float, float]:
        return float(self.K[0, 0]), float(self.K[1, 1]), float(self.K[0, 2]), float(self.K[1, 2])

    def flow(self, t: int) -> np.ndarray:
        """Dense flow from frame 0 to frame t, [H, W, 2]."""
        h, w = self.depth.shape[1:]
        yy, xx = np.mgrid[0:h, 0:w]
        return self.tracks_uv[t] - np.stack([xx, yy], -1)

    def sample_tracks(self, num: int, seed: int = 0, query_mode: str = "first"):
        """Random sparse tracks in TAP-Vid-3D layout: (queries_xyt [N, 3], tracks_xyz [T, N, 3], visibility [T, N]).

        ``query_mode="first"`` queries every track at frame 0; ``"random"`` at a random frame where it is visible.
        """
        rng = np.random.default_rng(seed)
        t, h, w = self.visibility.shape
        flat = rng.choice(h * w, size=min(num, h * w), replace=False)
        iy, ix = np.unravel_index(flat, (h, w))
        vis = self.visibility[:, iy, ix]
        xyz = self.tracks_xyz[:, iy, ix]
        uv = self.tracks_uv[:, iy, ix]
        if query_mode == "first":
            qt = np.zeros(len(flat), dtype=np.int64)
        elif query_mode == "random":
            qt = np.array([rng.choice(np.flatnonzero(vis[:, k])) for k in range(len(flat))], dtype=np.int64)
        else:
            raise ValueError(f"query_mode must be 'first' or 'random', got {query_mode!r}")
        q = np.stack([uv[qt, np.arange(len(flat)), 0], uv[qt, np.arange(len(flat)), 1], qt.astype(np.float64)], 1)
        return q, xyz, vis


def _random_object(rng: np.random.Generator, kind: int, depth_range: tuple[float, float], speed: float):
    z = rng.uniform(*depth_range)
    c0 = np.array([rng.uniform(-0.35, 0.35) * z, rng.uniform(-0.35, 0.35) * z, z])
    if kind == SPHERE:
        size = np.array([rng.uniform(0.12, 0.25) * z])
    elif kind == BOX:
        size = rng.uniform(0.08, 0.18, 3) * z
    else:
        size = rng.uniform(0.12, 0.25, 2) * z
    return _make(rng, kind, size, c0, speed * z, 0.08)


def _make(rng, kind, size, c0, speed, omega_max):
    nf = 3
    return SceneObject(
        kind=kind,
        size=np.asarray(size, np.float64),
        r0=rotation(rng.normal(size=3), rng.uniform(0, np.pi)),
        axis=rng.normal(size=3),
        omega=rng.uniform(-omega_max, omega_max),
        c0=np.asarray(c0, np.float64),
        vel=rng.normal(size=3) * np.array([1.0, 1.0, 0.5]) * speed,
        tex_matrix=rng.normal(size=(3, 3, nf)) * rng.uniform(2.0, 6.0, size=(1, 1, nf)) / min(float(np.max(size)), 2.0),
        tex_phase=rng.uniform(0, 2 * np.pi, size=(3, nf)),
        checker=float(rng.uniform(0.15, 0.35) * min(float(np.min(size)), 2.0)),
    )


class Scene:
    def __init__(self, objects: list[SceneObject], K: np.ndarray, height: int, width: int):
        self.objects, self.K, self.height, self.width = objects, K, height, width
        self.k_inv = np.linalg.inv(K)

    def rays(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        pix = np.stack([u, v, np.ones_like(u)], -1).reshape(-1, 3)
        return pix @ self.k_inv.T

    def cast(self, u: np.ndarray, v: np.ndarray, t: float):
        """First hit of the rays through pixels (u, v) at time t -> (depth, object index, local point)."""
        dirs = self.rays(u, v)
        best = np.full(dirs.shape[0], np.inf)
        obj = np.full(dirs.shape[0], -1)
        local = np.zeros((dirs.shape[0], 3))
        for i, o in enumerate(self.objects):
            lam, p = o.intersect(dirs, t)
            closer = lam < best
            best[closer], obj[closer], local[closer] = lam[closer], i, p[closer]
        return best, obj, local

    def shade(self, obj: np.ndarray, local: np.ndarray) -> np.ndarray:
        col = np.zeros((obj.shape[0], 3))
        for i, o in enumerate(self.objects):
            m = obj == i
            if m.any():
                col[m] = o.color(local[m])
        return col


def render_synthetic_clip(
    seed: int = 0,
    num_frames: int = 8,
    height: int = 64,
    width: int = 64,
    num_objects: int = 3,
    speed: float = 0.02,
    intrinsics: np.ndarray | None = None,
    supersample: int = 2,
    time_reversed: bool = False,
) -> SyntheticClip:
    """Render a clip of ``num_objects`` moving spheres/boxes/planes in front of a moving textured background plane.

    ``speed`` is the typical translation per frame as a fraction of the object depth (0.02 at f = W = 64 px is about
    1.3 px / frame). Deterministic given ``seed``. ``time_reversed`` plays the same scene backwards (the tracks then
    start at the pixels of the scene's last instant: the time-reversal augmentation with exact ground truth).
    """
    if num_frames < 1 or height < 4 or width < 4:
        raise ValueError(f"need num_frames >= 1 and an image of at least 4x4, got {num_frames}, {height}x{width}")
    rng = np.random.default_rng(seed)
    K = default_intrinsics(height, width) if intrinsics is None else np.asarray(intrinsics, np.float64)
    bg_depth = rng.uniform(6.0, 9.0)
    background = _make(
        rng, PLANE, np.array([np.inf, np.inf]), np.array([0.0, 0.0, bg_depth]), 0.5 * speed * bg_depth, 0.0
    )
    background.r0 = rotation(rng.normal(size=3), rng.uniform(0.0, 0.3))  # a slightly tilted wall facing the camera
    background.vel[2] = 0.0
    objects = [background] + [
        _random_object(rng, kind, (2.5, 5.0), speed) for kind in rng.integers(0, 3, size=num_objects)
    ]
    if time_reversed:
        for o in objects:  # pose(t) at the reversed time: c0 + v (T-1-t) and Rot(w (T-1-t))
            o.c0 = o.c0 + o.vel * (num_frames - 1)
            o.vel = -o.vel
            o.r0 = rotation(o.axis, o.omega * (num_frames - 1)) @ o.r0
            o.omega = -o.omega
    scene = Scene(objects, K, height, width)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    ss = supersample
    offs = (np.arange(ss) + 0.5) / ss - 0.5
    video = np.zeros((num_frames, 3, height, width), np.uint8)
    depth = np.zeros((num_frames, height, width), np.float32)
    for t in range(num_frames):
        col = np.zeros((height * width, 3))
        for oy in offs:
            for ox in offs:
                _, obj, local = scene.cast(xx + ox, yy + oy, t)
                col += scene.shade(obj, local)
        video[t] = np.round(255 * col / ss**2).reshape(height, width, 3).transpose(2, 0, 1).astype(np.uint8)
        depth[t] = scene.cast(xx, yy, t)[0].reshape(height, width)
    # dense ground truth from frame-0 hits
    _, obj0, local0 = scene.cast(xx, yy, 0)
    xyz = np.zeros((num_frames, height * width, 3))
    for i, o in enumerate(objects):
        m = obj0 == i
        for t in range(num_frames):
            r, c = o.pose(t)
            xyz[t, m] = local0[m] @ r.T + c
    z = xyz[..., 2]
    uv = np.stack([K[0, 0] * xyz[..., 0] / z + K[0, 2], K[1, 1] * xyz[..., 1] / z + K[1, 2]], -1)
    vis = np.zeros((num_frames, height * width), bool)
    for t in range(num_frames):
        eps = 1e-6  # frame-0 tracks sit on the pixel grid up to rounding
        u_t, v_t = uv[t, :, 0], uv[t, :, 1]
        inside = (u_t >= -eps) & (u_t <= width - 1 + eps) & (v_t >= -eps) & (v_t <= height - 1 + eps)
        inside &= z[t] > 0
        lam, obj, _ = scene.cast(uv[t, :, 0], uv[t, :, 1], t)
        vis[t] = inside & (obj == obj0) & (np.abs(lam - z[t]) <= VIS_RTOL * z[t])
    return SyntheticClip(
        video=video,
        depth=depth,
        tracks_uv=uv.reshape(num_frames, height, width, 2),
        tracks_xyz=xyz.reshape(num_frames, height, width, 3),
        visibility=vis.reshape(num_frames, height, width),
        K=K,
        object_id=obj0.reshape(height, width),
    )
