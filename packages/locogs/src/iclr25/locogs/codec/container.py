"""The ``.locogs`` container: one file, a header with version and per-section CRC32 checksums, then the sections.

Sections (LocoGS ``compress_attributes``): Morton-ordered lossless fp16 positions; 8-bit DC colour; 8-bit log base
scale; packed SH-band masks; the hash grid clipped at 4 sigma, log-transformed and 6-bit quantised; the four MLPs in
fp16. Everything but the positions is deflated (zlib), as the official ``np.savez_compressed``. Opacity, rotation,
scale ratios and SH-rest are never stored: the decoder evaluates the field once.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr25.shared import atomic_write

from ..config import CodecConfig, FieldConfig
from ..field import LocoGSField
from ..gaussians import GaussianSet
from ..model import nested_band_masks
from .morton import morton_order
from .positions import decode_positions, encode_positions
from .quantize import dequantize, quantize_uniform

MAGIC = b"LOCOGS\x00\x01"
VERSION = 1
_FIXED = struct.Struct("<8sHI")  # magic, version, header length


@dataclass
class SizeReport:
    sections: dict[str, int] = field(default_factory=dict)  # payload bytes per section
    header_bytes: int = 0
    n_gaussians: int = 0

    @property
    def total_bytes(self) -> int:
        return self.header_bytes + sum(self.sections.values())

    def bytes_per_gaussian(self, exclude=("grid", "mlp")) -> float:
        per = sum(v for k, v in self.sections.items() if k not in exclude)
        return per / max(self.n_gaussians, 1)


FP16_MAX = 65504.0
FP16_COARSE = 1e-3  # warn when one fp16 step exceeds this fraction of the scene's extent


def check_fp16_positions(xyz: np.ndarray) -> None:
    """Positions are stored as fp16 (LocoGS ``half_ste``): raise when one is not finite or beyond the fp16 range
    (it would decode as inf), and warn when the fp16 step at the largest coordinate is coarse relative to the
    extent of the point cloud (an off-centre scene: translate it towards the origin first)."""
    if not np.isfinite(xyz).all():
        raise ValueError(f"compress: {int((~np.isfinite(xyz)).any(1).sum())} positions are NaN or infinite")
    amax = float(np.abs(xyz).max())
    if amax > FP16_MAX:
        raise ValueError(f"compress: positions reach |x| = {amax:.6g}, beyond the fp16 range ({FP16_MAX:g}) LocoGS "
                         "stores them in; rescale or recentre the scene")  # fmt: skip
    extent = float((xyz.max(0) - xyz.min(0)).max())
    step = float(np.spacing(np.float16(amax))) if amax > 0 else 0.0
    if extent > 0 and step > FP16_COARSE * extent:
        import warnings

        warnings.warn(f"compress: the fp16 step at |x| = {amax:.6g} is {step:.3g}, {step / extent:.2%} of the scene "
                      f"extent {extent:.6g}: positions lose precision (recentre the scene at the origin)",
                      UserWarning, stacklevel=3)  # fmt: skip


def encode_model(model, codec: CodecConfig | None = None) -> tuple[dict[str, bytes], dict]:
    """Sections (bytes) and header metadata of a trained LocoGS model (masked Gaussians removed, Morton sorted)."""
    codec = codec or CodecConfig()
    st, cfg = model.store, model.cfg
    with torch.no_grad():
        keep = (torch.sigmoid(st["mask"]) > cfg.mask_threshold).cpu().numpy()
        if not keep.any():
            raise ValueError(f"compress: every one of the {len(keep)} Gaussians is masked out (sigmoid(mask) <= "
                             f"{cfg.mask_threshold}): there is nothing to store")  # fmt: skip
        xyz = st["means"].detach().cpu().double().numpy()[keep]
        check_fp16_positions(xyz)
        xyz16 = xyz.astype(np.float16)
        order = morton_order(xyz16.astype(np.float32), codec.morton_bits)
        xyz16 = xyz16[order]
        dc = st["f_dc"].detach().cpu().numpy()[keep][order]
        base = st["scale_base"].detach().cpu().numpy()[keep][order, 0]
        shm = (torch.sigmoid(st["sh_mask"]) > cfg.mask_threshold).cpu().numpy()[keep][order]
        shm = np.cumprod(shm, axis=1).astype(np.uint8)  # nested bands
        table = model.field.grid.table.detach().cpu().numpy()
        mlps = {k: [lin.weight.detach().cpu().numpy().astype(np.float16) for lin in head if hasattr(lin, "weight")]
                for k, head in model.field.heads.items()}  # fmt: skip
    q_dc, p_dc = quantize_uniform(dc, codec.color_bits)
    q_b, p_b = quantize_uniform(base, codec.scale_bits)
    q_g, p_g = quantize_uniform(table, codec.grid_bits, log=True)
    mlp_bytes = b"".join(w.astype("<f2").tobytes() for k in sorted(mlps) for w in mlps[k])
    sections = {
        "positions": encode_positions(xyz16),
        "color": zlib.compress(q_dc.tobytes(), 9),
        "scale": zlib.compress(q_b.tobytes(), 9),
        "sh_mask": zlib.compress(np.packbits(shm.reshape(-1)).tobytes(), 9),
        "grid": zlib.compress(q_g.tobytes(), 9),
        "mlp": zlib.compress(mlp_bytes, 9),
    }
    fc = cfg.field
    meta = {
        "n": int(len(xyz16)),
        "sh_degree": cfg.sh_degree,
        "init_opacity": cfg.init_opacity,
        "field": {
            k: getattr(fc, k)
            for k in (
                "n_levels",
                "features_per_level",
                "log2_hashmap_size",
                "base_resolution",
                "per_level_scale",
                "mlp_width",
                "mlp_hidden_layers",
                "aabb",
            )
        },  # fmt: skip
        "quant": {"color": p_dc.to_dict(), "scale": p_b.to_dict(), "grid": p_g.to_dict()},
        "mlp_shapes": {k: [list(w.shape) for w in mlps[k]] for k in sorted(mlps)},
    }
    return sections, meta


def compress(model, path, codec: CodecConfig | None = None) -> SizeReport:
    """Write ``model`` to one ``.locogs`` file; the report's sizes add up to the file size."""
    sections, meta = encode_model(model, codec)
    meta["version"] = VERSION
    meta["sections"] = [[name, len(data), zlib.crc32(data)] for name, data in sections.items()]
    header = json.dumps(meta, separators=(",", ":")).encode()
    header += struct.pack("<I", zlib.crc32(header))
    with atomic_write(path, "wb") as f:
        f.write(_FIXED.pack(MAGIC, VERSION, len(header)))
        f.write(header)
        for data in sections.values():
            f.write(data)
    report = SizeReport({k: len(v) for k, v in sections.items()}, _FIXED.size + len(header), meta["n"])
    actual = os.path.getsize(path)
    if actual != report.total_bytes:
        raise OSError(f"{path}: wrote {actual} bytes, expected {report.total_bytes}")
    return report


def read_container(path) -> tuple[dict, dict[str, bytes]]:
    """Header and verified sections of a ``.locogs`` file; any corruption raises ``ValueError``."""
    data = open(path, "rb").read()
    if len(data) < _FIXED.size:
        raise ValueError(f"{path}: truncated (no header)")
    magic, version, hlen = _FIXED.unpack_from(data, 0)
    if magic != MAGIC:
        raise ValueError(f"{path} is not a .locogs file (bad magic)")
    if version != VERSION:
        raise ValueError(f"{path}: unsupported .locogs version {version} (this reader: {VERSION})")
    if len(data) < _FIXED.size + hlen:
        raise ValueError(f"{path}: truncated header")
    header = data[_FIXED.size : _FIXED.size + hlen]
    (crc,) = struct.unpack("<I", header[-4:])
    if zlib.crc32(header[:-4]) != crc:
        raise ValueError(f"{path}: header checksum mismatch (corrupted file)")
    meta = json.loads(header[:-4])
    pos, sections = _FIXED.size + hlen, {}
    for name, size, crc in meta["sections"]:
        chunk = data[pos : pos + size]
        if len(chunk) != size:
            raise ValueError(f"{path}: truncated in section {name!r}")
        if zlib.crc32(chunk) != crc:
            raise ValueError(f"{path}: checksum mismatch in section {name!r} (corrupted file)")
        sections[name] = chunk
        pos += size
    if pos != len(data):
        raise ValueError(f"{path}: {len(data) - pos} unexpected trailing bytes")
    return meta, sections


def decode_field(meta: dict, sections: dict[str, bytes], backend: str = "auto") -> LocoGSField:
    fc = dict(meta["field"])
    fc["aabb"] = tuple(fc["aabb"])
    fld = LocoGSField(FieldConfig(**fc), meta["sh_degree"], backend)
    q_g = np.frombuffer(zlib.decompress(sections["grid"]), np.uint8)
    table = dequantize(q_g, meta["quant"]["grid"]).reshape(fld.grid.table.shape)
    mlp = np.frombuffer(zlib.decompress(sections["mlp"]), "<f2")
    off = 0
    with torch.no_grad():
        fld.grid.table.copy_(torch.from_numpy(table.astype(np.float32)))
        for k in sorted(meta["mlp_shapes"]):
            lins = [m for m in fld.heads[k] if hasattr(m, "weight")]
            for lin, shape in zip(lins, meta["mlp_shapes"][k]):
                size = int(np.prod(shape))
                lin.weight.copy_(torch.from_numpy(mlp[off : off + size].astype(np.float32).reshape(shape)))
                off += size
    return fld


def decompress(path, backend: str = "auto", device="cpu") -> GaussianSet:
    """Read a ``.locogs`` file and evaluate the field once: a plain GaussianSet with per-Gaussian SH degrees."""
    meta, sec = read_container(path)
    n, k = meta["n"], (meta["sh_degree"] + 1) ** 2
    xyz = torch.from_numpy(decode_positions(sec["positions"]).astype(np.float32)).to(device)
    q = meta["quant"]
    dc = dequantize(np.frombuffer(zlib.decompress(sec["color"]), np.uint8), q["color"]).reshape(n, 3)
    base = dequantize(np.frombuffer(zlib.decompress(sec["scale"]), np.uint8), q["scale"]).reshape(n, 1)
    shm = np.unpackbits(np.frombuffer(zlib.decompress(sec["sh_mask"]), np.uint8))[: 3 * n].reshape(n, 3)
    fld = decode_field(meta, sec, backend).to(device)
    with torch.no_grad():
        out = fld(xyz, meta["init_opacity"])
        hard = torch.from_numpy(shm.astype(np.float32)).to(device)
        sh = torch.cat([torch.from_numpy(dc.astype(np.float32)).to(device)[:, None], out["sh_rest"]], 1)
        sh = sh * nested_band_masks(hard, k)[..., None]
        scales = torch.exp(torch.from_numpy(base.astype(np.float32)).to(device)) * out["scale_ratio"]
        degrees = hard.long().cumprod(dim=1).sum(dim=1)
    return GaussianSet(xyz, out["rotation"], scales, out["opacity"], sh, degrees)


def quantize_in_memory(model, codec: CodecConfig | None = None):
    """A copy of ``model`` with exactly the codec's quantisation applied to its tensors (masked Gaussians removed,
    fp16 positions, dequantised colour / base scale / grid, fp16 MLPs): the oracle for the decoded file."""
    import copy

    codec = codec or CodecConfig()
    m = copy.deepcopy(model)
    st, cfg = m.store, m.cfg
    with torch.no_grad():
        st.keep(torch.sigmoid(st["mask"]) > cfg.mask_threshold)
        st.replace("means", st["means"].half().float())

        def qd(t, bits, log=False):
            q, p = quantize_uniform(t.detach().cpu().numpy(), bits, log=log)
            return torch.from_numpy(dequantize(q, p).astype(np.float32)).reshape(t.shape).to(t.device)

        st.replace("f_dc", qd(st["f_dc"], codec.color_bits))
        st.replace("scale_base", qd(st["scale_base"], codec.scale_bits))
        m.field.grid.table.copy_(qd(m.field.grid.table, codec.grid_bits, log=True))
        for p in m.field.heads.parameters():
            p.copy_(p.half().float())
    return m
