"""Pure-torch column-skipping sparse GEMV (the CPU fast path; also works on any device).

The weight must be stored column-major (``W^T`` contiguous, see :func:`prepare_weight`), so the weights of one input
channel form one contiguous row of ``W^T`` and a skipped channel is a skipped row: its bytes are never loaded.
Which torch op realises "y = sum over active k of x_k W^T[k, :]" fastest was measured on a 2-core AMD EPYC
(see benchmarks/bench_teal_gemv.py and the README):

* fp32/fp64: ``torch.sparse.mm`` of a COO row vector with ``W^T`` (an axpy per active row);
* fp16/bf16: ``F.embedding_bag(mode="sum", per_sample_weights=...)`` over the active rows (fp32 accumulation);
* int8 with per-output-channel scales: ``quantized::embedding_bag_byte_rowwise_offsets`` over packed rows
  (unit row scale, bias -128 on uint8 = q + 128), per-output scales applied afterwards.

A gather of the active weight columns followed by a dense product is slower than dense here (it reads, writes and
re-reads the active half) and is used only for a row-major weight, where no layout allows skipping whole cache lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .reference import active_mask


def prepare_weight(weight: torch.Tensor) -> torch.Tensor:
    """Same ``[out, in]`` tensor stored column-major (``weight.t()`` contiguous): the layout the kernels skip best."""
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D [out, in], got shape {tuple(weight.shape)}")
    return weight if weight.stride(0) == 1 and weight.shape[1] > 1 else weight.t().contiguous().t()


def active_channels(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """Indices k with |x_k| > t (sorted)."""
    return torch.nonzero(active_mask(x, threshold)).squeeze(1)


def _finish(y: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return y if bias is None else y + bias


def column_skip_gemv(
    x: torch.Tensor, weight: torch.Tensor, threshold: float, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """y = W (x * 1[|x| > t]) + b, reading only the weight columns of active channels. ``x``: ``[in]``."""
    out_features, in_features = weight.shape
    idx = active_channels(x, threshold)
    if idx.numel() == 0:
        return _finish(torch.zeros(out_features, dtype=weight.dtype, device=weight.device), bias)
    vals = x.index_select(0, idx)
    if weight.stride(0) != 1 or in_features == 1:  # row-major: gather columns (correct but not a fast path)
        return _finish(torch.mv(weight.index_select(1, idx), vals), bias)
    wt = weight.t()  # [in, out], contiguous rows
    if weight.dtype in (torch.float32, torch.float64):
        coo = torch.sparse_coo_tensor(
            torch.stack([torch.zeros_like(idx), idx]), vals, (1, in_features), is_coalesced=True, check_invariants=False
        )
        y = torch.sparse.mm(coo, wt).squeeze(0)
    else:
        offsets = torch.zeros(1, dtype=torch.long, device=x.device)
        y = F.embedding_bag(idx, wt, offsets, mode="sum", per_sample_weights=vals).squeeze(0)
    return _finish(y, bias)


def column_skip_qkv_gemv(
    x: torch.Tensor, weight_qkv: torch.Tensor, thresholds: tuple[float, float, float], sizes: tuple[int, int, int]
) -> torch.Tensor:
    """Fused-layout q/k/v: each output block uses its own threshold (three column-skipping products)."""
    parts = torch.split(weight_qkv, list(sizes), dim=0)
    return torch.cat([column_skip_gemv(x, w, t) for w, t in zip(parts, thresholds)])


@dataclass
class Int8Weight:
    """Symmetric int8 weight with per-output-channel scales: W ~= scales[:, None] * qweight."""

    qweight: torch.Tensor  # [out, in] int8
    scales: torch.Tensor  # [out] float32
    _packed: torch.Tensor | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.qweight.dtype != torch.int8 or self.qweight.dim() != 2:
            raise TypeError(f"qweight must be a 2-D int8 tensor, got {self.qweight.dtype} {tuple(self.qweight.shape)}")
        if self.scales.shape != (self.qweight.shape[0],):
            raise ValueError(f"scales must have shape ({self.qweight.shape[0]},), got {tuple(self.scales.shape)}")
        self.scales = self.scales.to(torch.float32)

    @classmethod
    def quantize(cls, weight: torch.Tensor) -> Int8Weight:
        """Per-output-channel absmax quantization to int8 (round to nearest)."""
        w = weight.detach().float()
        scales = w.abs().amax(dim=1).clamp_min(1e-12) / 127.0
        q = torch.round(w / scales[:, None]).clamp_(-127, 127).to(torch.int8)
        return cls(prepare_weight(q), scales)

    def dequantize(self) -> torch.Tensor:
        return self.qweight.float() * self.scales[:, None]

    @property
    def packed(self) -> torch.Tensor:
        """``[in, out + 8]`` uint8 rows for ``embedding_bag_byte_rowwise_offsets``: q + 128, row scale 1, bias -128."""
        if self._packed is None:
            rows = (self.qweight.t().to(torch.int16) + 128).to(torch.uint8)
            tail = torch.tensor([1.0, -128.0], dtype=torch.float32).expand(rows.shape[0], 2).contiguous()
            self._packed = torch.cat([rows, tail.view(torch.uint8)], dim=1).contiguous()
        return self._packed


def _has_byte_embedding_bag() -> bool:
    try:
        return hasattr(torch.ops.quantized, "embedding_bag_byte_rowwise_offsets")
    except (AttributeError, RuntimeError):
        return False


def column_skip_gemv_int8(x: torch.Tensor, w: Int8Weight, threshold: float) -> torch.Tensor:
    """y_j = scale_j * sum over active k of x_k q_jk (fp32), reading only the int8 rows of active channels."""
    x = x.to(torch.float32)
    idx = active_channels(x, threshold)
    if idx.numel() == 0:
        return torch.zeros(w.qweight.shape[0], dtype=torch.float32, device=x.device)
    vals = x.index_select(0, idx)
    if x.device.type == "cpu" and _has_byte_embedding_bag():
        offsets = torch.zeros(1, dtype=torch.long)
        acc = torch.ops.quantized.embedding_bag_byte_rowwise_offsets(
            w.packed, idx, offsets, False, 0, False, vals, None, False
        ).squeeze(0)
    else:
        acc = torch.mv(w.qweight.index_select(1, idx).float(), vals)
    return acc * w.scales
