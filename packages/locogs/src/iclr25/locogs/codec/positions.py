"""Lossless coding of fp16 positions (our stand-in for G-PCC, which is not installable).

The points are Morton-sorted; each axis's fp16 bit pattern is mapped to an order-preserving integer, delta-coded
along the curve and zig-zagged; each delta is split into its bit length (entropy coded with an adaptive-free
categorical model and ANS from ``constriction``) and its remaining mantissa bits (stored raw, bit-packed).
"""

from __future__ import annotations

import struct

import numpy as np

MAGIC = b"POS1"


def _ordered(bits16: np.ndarray) -> np.ndarray:
    """fp16 bit patterns -> integers in the same order as the float values (int32)."""
    b = bits16.astype(np.int32) & 0xFFFF
    return np.where(b & 0x8000, 0x8000 - 1 - (b & 0x7FFF), b + 0x8000) - 0x8000


def _unordered(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.int64) + 0x8000
    neg = v < 0x8000
    b = np.where(neg, (0x8000 - 1 - v) | 0x8000, v - 0x8000)
    return (b & 0xFFFF).astype(np.uint16)


def _zigzag(d: np.ndarray) -> np.ndarray:
    return np.where(d >= 0, 2 * d, -2 * d - 1).astype(np.uint64)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    z = z.astype(np.int64)
    return np.where(z & 1, -(z + 1) // 2, z // 2)


def _entropy_encode(symbols: np.ndarray, alphabet: int) -> tuple[bytes, np.ndarray]:
    import constriction

    counts = np.bincount(symbols, minlength=alphabet).astype(np.uint32)
    if len(symbols) == 0:
        return b"", counts
    model = constriction.stream.model.Categorical((counts + 1e-3) / (counts + 1e-3).sum(), perfect=False)
    coder = constriction.stream.stack.AnsCoder()
    coder.encode_reverse(symbols.astype(np.int32), model)
    return coder.get_compressed().tobytes(), counts


def _entropy_decode(data: bytes, counts: np.ndarray, n: int) -> np.ndarray:
    import constriction

    if n == 0:
        return np.zeros(0, np.int64)
    model = constriction.stream.model.Categorical((counts + 1e-3) / (counts + 1e-3).sum(), perfect=False)
    coder = constriction.stream.stack.AnsCoder(np.frombuffer(data, dtype=np.uint32).copy())
    return np.asarray(coder.decode(model, n), dtype=np.int64)


def encode_positions(xyz16: np.ndarray) -> bytes:
    """Encode fp16 positions [N, 3] (in the given order: sort them by Morton code first for good compression)."""
    xyz16 = np.ascontiguousarray(xyz16, dtype=np.float16)
    if xyz16.ndim != 2 or xyz16.shape[1] != 3:
        raise ValueError(f"encode_positions: expected [N, 3] fp16 positions, got {xyz16.shape}")
    n = len(xyz16)
    vals = _ordered(xyz16.view(np.uint16)).astype(np.int64)  # [N, 3]
    deltas = np.diff(vals, axis=0, prepend=np.zeros((1, 3), np.int64))
    z = _zigzag(deltas).reshape(-1)
    nbits = np.zeros(z.shape, np.int64)
    nz = z > 0
    nbits[nz] = np.floor(np.log2(z[nz].astype(np.float64))).astype(np.int64) + 1
    sym, counts = _entropy_encode(nbits, 18)
    # mantissa: the nbits - 1 bits below the leading one, MSB first
    width = np.maximum(nbits - 1, 0)
    total = int(width.sum())
    bits = np.zeros(total, np.uint8)
    pos = np.concatenate([[0], np.cumsum(width)[:-1]]) if len(width) else np.zeros(0, np.int64)
    for k in range(int(width.max()) if len(width) else 0):
        sel = width > k
        bits[pos[sel] + k] = ((z[sel] >> (width[sel] - 1 - k).astype(np.uint64)) & np.uint64(1)).astype(np.uint8)
    raw = np.packbits(bits).tobytes()
    header = MAGIC + struct.pack("<QII", n, len(sym), len(raw)) + counts.astype("<u4").tobytes()
    return header + sym + raw


def decode_positions(data: bytes) -> np.ndarray:
    """Inverse of ``encode_positions``: fp16 positions [N, 3], bit exact."""
    head = 4 + struct.calcsize("<QII") + 18 * 4
    if len(data) < head or data[:4] != MAGIC:
        raise ValueError("position stream: bad magic or truncated header")
    n, n_sym, n_raw = struct.unpack_from("<QII", data, 4)
    if len(data) != head + n_sym + n_raw:
        raise ValueError(f"position stream: expected {head + n_sym + n_raw} bytes, got {len(data)}")
    counts = np.frombuffer(data, "<u4", 18, 4 + struct.calcsize("<QII")).astype(np.float64)
    nbits = _entropy_decode(data[head : head + n_sym], counts, 3 * n)
    width = np.maximum(nbits - 1, 0)
    bits = np.unpackbits(np.frombuffer(data[head + n_sym :], np.uint8))
    if bits.size < width.sum():
        raise ValueError("position stream: mantissa bits truncated")
    pos = np.concatenate([[0], np.cumsum(width)[:-1]]) if len(width) else np.zeros(0, np.int64)
    z = np.where(nbits > 0, np.uint64(1) << np.maximum(nbits - 1, 0).astype(np.uint64), np.uint64(0))
    for k in range(int(width.max()) if len(width) else 0):
        sel = width > k
        z[sel] |= bits[pos[sel] + k].astype(np.uint64) << (width[sel] - 1 - k).astype(np.uint64)
    deltas = _unzigzag(z).reshape(n, 3)
    vals = np.cumsum(deltas, axis=0)
    return _unordered(vals).view(np.float16).reshape(n, 3)
