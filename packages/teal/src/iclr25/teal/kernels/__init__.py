"""TEAL decode kernels: sparse GEMV y = W (x * 1[|x| > t]) that never reads the weight columns of inactive channels.

Backends: ``"triton"`` (split-K Triton kernel; CUDA, or the interpreter in tests), ``"torch"`` (column-skipping torch
ops; the CPU fast path, see :mod:`.column_skip`), ``"reference"`` (mask then dense ``F.linear``: reads all of W),
``"auto"`` (triton on CUDA tensors, torch otherwise). These are decode kernels: an input with more than one token
(``x`` of shape ``[..., T, in]`` with more than one row) takes the dense path explicitly — the product is computed
as ``F.linear(x * mask, W)`` — instead of being silently wrong as the official kernel is.
"""

from __future__ import annotations

import torch

from iclr25.shared import resolve_backend

from .column_skip import Int8Weight, column_skip_gemv, column_skip_gemv_int8, column_skip_qkv_gemv, prepare_weight
from .reference import sparse_gemv_int8_reference, sparse_gemv_reference, sparse_qkv_gemv_reference

BACKENDS = ("auto", "torch", "triton", "reference")
# backend="auto" on CPU (decode_backend): below this weight size the per-call overhead of building the active-channel
# index (~0.1 ms) outweighs the skipped bytes, and small weights may sit in cache (measured: the 16-128 KB matrices of
# the shipped small model decode 1.6-1.8x slower with column skipping; a 4 MB 512x2048 fp32 k_proj 2.3x slower).
CPU_SKIP_MIN_BYTES = 8 << 20

__all__ = [
    "BACKENDS",
    "CPU_SKIP_MIN_BYTES",
    "decode_backend",
    "Int8Weight",
    "prepare_weight",
    "sparse_gemv",
    "sparse_gemv_int8",
    "sparse_qkv_gemv",
    "sparse_gemv_reference",
    "sparse_qkv_gemv_reference",
    "sparse_gemv_int8_reference",
]


def _resolve(x: torch.Tensor, backend: str) -> str:
    """The backend for ``x``; multi-token inputs always take the dense reference path (checked before Triton)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "reference" or not _is_single_token(x):
        return "reference"
    if backend == "torch":
        return "torch"
    return resolve_backend(x, backend)  # "auto" -> triton on CUDA else torch; "triton" checked there


def decode_backend(weight_bytes: int, device: torch.device | str, backend: str = "auto") -> str:
    """The backend a single-token decode GEMV of a weight of ``weight_bytes`` bytes on ``device`` will use.

    ``"reference"`` (mask, then dense ``F.linear`` on the row-major weight), ``"torch"`` (column skipping) or
    ``"triton"``. ``"auto"``: Triton on CUDA when it imports; on CPU column skipping only for weights of at least
    :data:`CPU_SKIP_MIN_BYTES`, else the reference. Explicit backends are validated (``"triton"`` without CUDA needs
    the interpreter).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend in ("reference", "torch"):
        return backend
    be = resolve_backend(device, backend)
    if backend == "auto" and be == "torch" and int(weight_bytes) < CPU_SKIP_MIN_BYTES:
        return "reference"
    return be


def _check_threshold(threshold) -> float:
    t = float(threshold)
    if not t >= 0.0:  # also rejects NaN
        raise ValueError(f"threshold must be >= 0 (inf allowed), got {threshold}")
    return t


def _check_x_weight(x: torch.Tensor, weight: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(weight, torch.Tensor):
        raise TypeError("x and weight must be torch tensors")
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D [out, in], got shape {tuple(weight.shape)}")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features but weight is [out={weight.shape[0]}, in={weight.shape[1]}]")
    if x.device != weight.device:
        raise ValueError(f"x is on {x.device} but weight is on {weight.device}")


def _is_single_token(x: torch.Tensor) -> bool:
    return x.numel() == x.shape[-1]


def sparse_gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    threshold: float,
    *,
    bias: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """y = W (x * 1[|x| > t]) + b for one decode token.

    ``x``: ``[in]`` (or any shape with one token, e.g. ``[1, 1, in]``; the output keeps the leading dims);
    ``weight``: ``[out, in]`` as in ``nn.Linear``, any strides (``prepare_weight(W)`` gives the column-major layout
    the kernels skip best). ``threshold`` = 0 gives the dense product, ``inf`` gives zeros (plus bias).
    Multi-token inputs fall back to dense ``F.linear`` on the thresholded input.
    """
    _check_x_weight(x, weight)
    t = _check_threshold(threshold)
    if x.dtype != weight.dtype:
        raise TypeError(f"x dtype {x.dtype} differs from weight dtype {weight.dtype}")
    be = _resolve(x, backend)
    if be == "reference":
        return sparse_gemv_reference(x, weight, t, bias)
    lead = x.shape[:-1]
    flat = x.reshape(-1)
    if be == "triton":
        from .splitk_sparse_gemv import sparse_gemv_triton

        y = sparse_gemv_triton(flat, weight, t, bias)
    else:
        y = column_skip_gemv(flat, weight, t, bias)
    return y.reshape(*lead, weight.shape[0])


def sparse_qkv_gemv(
    x: torch.Tensor,
    weight_qkv: torch.Tensor,
    thresholds: tuple[float, float, float],
    sizes: tuple[int, int, int],
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """Fused q/k/v decode GEMV: ``weight_qkv`` = cat([W_q, W_k, W_v]) (``sizes`` output rows each), one threshold per
    block. Returns ``[q | k | v]``; multi-token inputs take the dense path."""
    _check_x_weight(x, weight_qkv)
    if len(thresholds) != 3 or len(sizes) != 3:
        raise ValueError("sparse_qkv_gemv needs three thresholds and three sizes (q, k, v)")
    if sum(sizes) != weight_qkv.shape[0] or min(sizes) < 1:
        raise ValueError(f"sizes {tuple(sizes)} must be positive and sum to the {weight_qkv.shape[0]} output rows")
    ts = tuple(_check_threshold(t) for t in thresholds)
    if x.dtype != weight_qkv.dtype:
        raise TypeError(f"x dtype {x.dtype} differs from weight dtype {weight_qkv.dtype}")
    be = _resolve(x, backend)
    if be == "reference":
        return sparse_qkv_gemv_reference(x, weight_qkv, ts, tuple(sizes))
    flat = x.reshape(-1)
    if be == "triton":
        from .splitk_sparse_gemv import sparse_qkv_gemv_triton

        y = sparse_qkv_gemv_triton(flat, weight_qkv, ts, tuple(sizes))
    else:
        y = column_skip_qkv_gemv(flat, weight_qkv, ts, tuple(sizes))
    return y.reshape(*x.shape[:-1], weight_qkv.shape[0])


def sparse_gemv_int8(x: torch.Tensor, weight: Int8Weight, threshold: float, *, backend: str = "auto") -> torch.Tensor:
    """int8-weight sparse GEMV: y_j = scale_j * sum_{k: |x_k| > t} x_k q_jk, in fp32 (TEAL + weight quantization)."""
    if not isinstance(weight, Int8Weight):
        raise TypeError(f"weight must be an Int8Weight (Int8Weight.quantize(W)), got {type(weight).__name__}")
    _check_x_weight(x, weight.qweight)
    t = _check_threshold(threshold)
    be = _resolve(x, backend)
    if be == "reference":
        return sparse_gemv_int8_reference(x, weight.qweight, weight.scales, t)
    flat = x.reshape(-1).to(torch.float32)
    if be == "triton":
        from .splitk_sparse_gemv import sparse_gemv_int8_triton

        y = sparse_gemv_int8_triton(flat, weight.qweight, weight.scales, t)
    else:
        y = column_skip_gemv_int8(flat, weight, t)
    return y.reshape(*x.shape[:-1], weight.qweight.shape[0])
