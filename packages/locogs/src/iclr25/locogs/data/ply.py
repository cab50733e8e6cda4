"""PLY I/O: a small reader for vertex elements (ascii and binary), point clouds, and the standard 3DGS layout
(x y z nx ny nz f_dc_0..2 f_rest_0..44 opacity scale_0..2 rot_0..3; logit opacity, log scale, wxyz rotation,
f_rest channel-major) so any 3DGS viewer opens our files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from iclr25.shared import atomic_write

from ..gaussians import GaussianSet

_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1", "short": "i2", "int16": "i2", "ushort": "u2",
    "uint16": "u2", "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4", "float": "f4", "float32": "f4",
    "double": "f8", "float64": "f8",
}  # fmt: skip


def read_ply_vertices(path) -> np.ndarray:
    """The ``vertex`` element of a PLY file as a numpy structured array."""
    path = Path(path)
    data = path.read_bytes()
    end = data.find(b"end_header")
    if not data.startswith(b"ply") or end < 0:
        raise ValueError(f"{path} is not a PLY file (missing 'ply' magic or 'end_header')")
    header = data[:end].decode("ascii", errors="replace").splitlines()
    body = data[data.index(b"\n", end) + 1 :]
    fmt, elements = None, []
    for line in header:
        tok = line.split()
        if not tok:
            continue
        if tok[0] == "format":
            fmt = tok[1]
        elif tok[0] == "element":
            elements.append([tok[1], int(tok[2]), []])
        elif tok[0] == "property":
            if tok[1] == "list":
                raise ValueError(f"{path}: list properties before the vertex data are not supported")
            if tok[1] not in _TYPES:
                raise ValueError(f"{path}: unknown PLY type {tok[1]!r}")
            elements[-1][2].append((tok[2], _TYPES[tok[1]]))
    if not elements or elements[0][0] != "vertex":
        raise ValueError(f"{path}: the first PLY element must be 'vertex'")
    _, count, props = elements[0]
    if fmt == "ascii":
        rows = body.decode("ascii").split("\n")[:count]
        arr = np.loadtxt(rows, ndmin=2) if count else np.zeros((0, len(props)))
        out = np.zeros(count, dtype=[(n, t) for n, t in props])
        for i, (n, _t) in enumerate(props):
            out[n] = arr[:, i]
        return out
    order = {"binary_little_endian": "<", "binary_big_endian": ">"}.get(fmt)
    if order is None:
        raise ValueError(f"{path}: unsupported PLY format {fmt!r}")
    dtype = np.dtype([(n, order + t) for n, t in props])
    if len(body) < count * dtype.itemsize:
        raise ValueError(f"{path}: truncated ({len(body)} bytes for {count} vertices of {dtype.itemsize} bytes)")
    return np.frombuffer(body, dtype=dtype, count=count).copy()


def write_ply_vertices(path, arrays: dict[str, np.ndarray]) -> None:
    """Binary little-endian PLY with one vertex element; ``arrays`` maps property name -> 1D array."""
    names = list(arrays)
    n = len(next(iter(arrays.values()))) if arrays else 0
    dtype = np.dtype([(k, "<" + np.asarray(arrays[k]).dtype.str[1:]) for k in names])
    rec = np.empty(n, dtype=dtype)
    for k in names:
        rec[k] = arrays[k]
    inv = {
        v: k for k, v in _TYPES.items() if k in ("char", "uchar", "short", "ushort", "int", "uint", "float", "double")
    }
    lines = ["ply", "format binary_little_endian 1.0", f"element vertex {n}"]
    lines += [f"property {inv[dtype[k].str[1:]]} {k}" for k in names]
    lines.append("end_header")
    with atomic_write(path, "wb") as f:
        f.write(("\n".join(lines) + "\n").encode("ascii"))
        f.write(rec.tobytes())


def write_3dgs_ply(path, g: GaussianSet) -> None:
    """Standard 3DGS PLY. Per-Gaussian SH degrees are baked in by zeroing the masked bands."""
    sh = g.sh.detach().float().cpu()
    if g.sh_degrees is not None:
        bands = torch.tensor([int(k**0.5) for k in range(sh.shape[1])])
        sh = sh * (bands[None, :] <= g.sh_degrees.cpu()[:, None]).float()[..., None]
    n = len(g)
    cols = {}
    means = g.means.detach().float().cpu().numpy()
    for i, k in enumerate("xyz"):
        cols[k] = means[:, i]
    for k in ("nx", "ny", "nz"):
        cols[k] = np.zeros(n, np.float32)
    for i in range(3):
        cols[f"f_dc_{i}"] = sh[:, 0, i].numpy()
    rest = sh[:, 1:, :].transpose(1, 2).reshape(n, -1).numpy()  # channel-major, as graphdeco
    for i in range(rest.shape[1]):
        cols[f"f_rest_{i}"] = rest[:, i]
    op = g.opacities.detach().double().cpu().clamp(1e-7, 1 - 1e-7)
    cols["opacity"] = torch.logit(op).float().numpy()
    scales = torch.log(g.scales.detach().float().cpu().clamp_min(1e-12)).numpy()
    for i in range(3):
        cols[f"scale_{i}"] = scales[:, i]
    q = g.quats.detach().float().cpu()
    q = (q / q.norm(dim=1, keepdim=True).clamp_min(1e-12)).numpy()
    for i in range(4):
        cols[f"rot_{i}"] = q[:, i]
    write_ply_vertices(path, cols)


def read_3dgs_ply(path) -> GaussianSet:
    v = read_ply_vertices(path)
    names = v.dtype.names
    need = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", *[f"scale_{i}" for i in range(3)],
            *[f"rot_{i}" for i in range(4)]]  # fmt: skip
    missing = [k for k in need if k not in names]
    if missing:
        raise ValueError(f"{path} is not a 3DGS PLY: missing properties {missing}")
    n_rest = len([k for k in names if k.startswith("f_rest_")])
    if n_rest not in (0, 9, 24, 45):
        raise ValueError(f"{path}: {n_rest} f_rest properties (expected 0, 9, 24 or 45)")

    def col(*ks):
        return torch.from_numpy(np.stack([v[k].astype(np.float32) for k in ks], axis=1))

    n = len(v)
    dc = col("f_dc_0", "f_dc_1", "f_dc_2")[:, None, :]
    rest = col(*[f"f_rest_{i}" for i in range(n_rest)]).reshape(n, 3, n_rest // 3).transpose(1, 2) if n_rest else None
    sh = dc if rest is None else torch.cat([dc, rest], dim=1)
    return GaussianSet(
        means=col("x", "y", "z"),
        quats=col("rot_0", "rot_1", "rot_2", "rot_3"),
        scales=torch.exp(col("scale_0", "scale_1", "scale_2")),
        opacities=torch.sigmoid(torch.from_numpy(v["opacity"].astype(np.float32))),
        sh=sh.contiguous(),
    )


def load_point_cloud(path) -> tuple[np.ndarray, np.ndarray]:
    """Points [M, 3] and colours [M, 3] in [0, 1] from a PLY (x y z [red green blue]) or an NPY/NPZ ([M, 3] or
    [M, 6] xyzrgb; NPZ keys ``points`` / ``colors``). Missing colours are grey."""
    path = Path(path)
    if path.suffix == ".ply":
        v = read_ply_vertices(path)
        pts = np.stack([v["x"], v["y"], v["z"]], 1).astype(np.float32)
        if all(k in v.dtype.names for k in ("red", "green", "blue")):
            cols = np.stack([v["red"], v["green"], v["blue"]], 1).astype(np.float32)
            cols = cols / 255.0 if v["red"].dtype.kind in "ui" else cols
        else:
            cols = np.full_like(pts, 0.5)
        return pts, cols
    if path.suffix == ".npz":
        z = np.load(path)
        pts = np.asarray(z["points"], np.float32)
        return pts, np.asarray(z["colors"], np.float32) if "colors" in z else np.full_like(pts, 0.5)
    if path.suffix == ".npy":
        a = np.load(path).astype(np.float32)
        if a.ndim != 2 or a.shape[1] not in (3, 6):
            raise ValueError(f"{path}: expected an [M, 3] or [M, 6] array, got {a.shape}")
        return a[:, :3], a[:, 3:] if a.shape[1] == 6 else np.full_like(a[:, :3], 0.5)
    raise ValueError(f"unsupported point cloud file {path} (expected .ply, .npy or .npz)")


def save_point_cloud(path, points: np.ndarray, colors: np.ndarray) -> None:
    rgb = np.clip(np.round(np.asarray(colors) * 255), 0, 255).astype(np.uint8)
    p = np.asarray(points, np.float32)
    write_ply_vertices(path, {"x": p[:, 0], "y": p[:, 1], "z": p[:, 2], "red": rgb[:, 0], "green": rgb[:, 1],
                              "blue": rgb[:, 2]})  # fmt: skip
