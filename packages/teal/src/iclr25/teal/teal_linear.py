"""``TealLinear``: an ``nn.Linear`` whose input is magnitude-thresholded, W (x * 1[|x| > t]) + b.

Which path a call takes depends on its input, never on the weight layout:

* one decode token (``x.numel() == in_features``, e.g. ``[1, 1, d]`` or ``[d]``) is sparsified and goes through the
  decode dispatcher :func:`iclr25.teal.kernels.sparse_gemv` with the backend chosen once per device by
  :func:`iclr25.teal.kernels.decode_backend` (``"triton"`` on CUDA; on CPU column skipping for weights of at least
  ``CPU_SKIP_MIN_BYTES``, else mask + dense);
* every other input (prefill ``[B, T, d]``, ``[T, d]``, a batch of decode tokens ``[B, 1, d]``, evaluation) is
  computed with ``F.linear`` on the row-major weight, after masking the positions the prefill policy sparsifies
  (``"last_half"``: the last floor(T/2) positions, official evaluation convention; ``"dense"``; ``"all"``; a
  single-position input ``[B, 1, d]`` is a decode step and is always sparsified).

The module's parameters are the wrapped linear's own ``weight`` and ``bias`` (same objects), so its state dict has
exactly the keys of a plain ``nn.Linear`` and ``save_pretrained`` writes a plain model. The decode kernels that skip
weight columns need each input channel's weights contiguous: only then is a column-major copy (``W^T`` contiguous)
held, next to the row-major weight; it is rebuilt when the weight changes (``extra_bytes`` reports its size). With
``quantize="int8"`` every path computes with per-output-channel int8 weights (``Int8Weight``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import kernels
from .config import DEFAULT_PREFILL, PREFILL_MODES
from .kernels.reference import active_mask, sparsify_input

LINEAR_BACKENDS = kernels.BACKENDS
QUANTIZE_MODES = (None, "int8")


def _weight_key(*weights: torch.Tensor) -> tuple:
    """Identifies the weight values a derived copy was made from (storage, in-place version, dtype, device)."""
    return tuple((w.data_ptr(), w._version, w.dtype, w.device, tuple(w.shape)) for w in weights)


def _compiling() -> bool:
    return bool(getattr(torch, "compiler", None) and torch.compiler.is_compiling())


def check_options(prefill: str, backend: str, quantize: str | None) -> None:
    """Refuse a prefill policy, decode backend or quantization mode that TealLinear does not have."""
    if prefill not in PREFILL_MODES:
        raise ValueError(f"prefill must be one of {PREFILL_MODES}, got {prefill!r}")
    if backend not in LINEAR_BACKENDS:
        raise ValueError(f"backend must be one of {LINEAR_BACKENDS}, got {backend!r}")
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {QUANTIZE_MODES}, got {quantize!r}")


class TealLinear(nn.Module):
    """``nn.Linear`` with TEAL input sparsification (threshold, prefill policy, decode kernel backend)."""

    def __init__(
        self,
        linear: nn.Linear,
        threshold: float = 0.0,
        *,
        prefill: str = DEFAULT_PREFILL,
        backend: str = "auto",
        quantize: str | None = None,
    ):
        super().__init__()
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"TealLinear wraps an nn.Linear, got {type(linear).__name__}")
        check_options(prefill, backend, quantize)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight  # the same Parameter objects: state-dict keys of a plain nn.Linear
        self.bias = linear.bias
        self.__dict__["_linear"] = linear  # the original module (not a submodule), put back by remove()
        self.prefill = prefill
        self.backend = backend
        self.quantize = quantize
        # the threshold is not part of the model's state dict (save thresholds with TealHandle.save)
        self.register_buffer("threshold", torch.zeros((), dtype=torch.float32), persistent=False)
        self._t = 0.0
        self._resolved: dict[str, str] = {}
        self._cm: torch.Tensor | None = None  # [out, in] view of a contiguous [in, out] copy (decode kernels only)
        self._cm_key: tuple | None = None
        self._int8: kernels.Int8Weight | None = None
        self._int8_key: tuple | None = None
        self.qkv_group = None  # set by apply_teal(fuse_qkv=True)
        self.track = False
        self.zeroed = 0
        self.seen = 0
        if quantize == "int8":
            self._int8_weight()
        self.set_threshold(threshold)

    @property
    def linear(self) -> nn.Linear:
        """The wrapped ``nn.Linear`` (sharing this module's weight and bias)."""
        lin = self.__dict__["_linear"]
        if lin.weight is not self.weight:
            lin.weight = self.weight
        if lin.bias is not self.bias:
            lin.bias = self.bias
        return lin

    # -- thresholds and derived weights -------------------------------------------------------------------------------
    def set_threshold(self, threshold: float) -> None:
        t = float(threshold)
        if not t >= 0.0:  # also rejects NaN
            raise ValueError(f"threshold must be a non-negative number, got {threshold}")
        self.threshold.fill_(t)
        self._t = t
        if t > 0 and self.qkv_group is None and self.decode_backend(self.weight.device) in ("torch", "triton"):
            self._column_major()  # build it now, outside any timed or compiled region

    def decode_backend(self, device: torch.device | str) -> str:
        """The decode backend on ``device`` (resolved once per device type through the kernels' dispatcher)."""
        dev = torch.device(device).type
        be = self._resolved.get(dev)
        if be is None:
            nbytes = self.weight.numel() * self.weight.element_size()
            be = kernels.decode_backend(nbytes, dev, self.backend)
            if self.quantize == "int8" and be == "reference" and self.backend == "auto":
                be = "torch"  # the int8 reference dequantizes the whole matrix on every call
            self._resolved[dev] = be
        return be

    def _column_major(self) -> torch.Tensor:
        """The column-major copy of W (``[out, in]`` with ``stride(0) == 1``), rebuilt if W changed."""
        if self._cm is not None and (_compiling() or self._cm_key == _weight_key(self.weight)):
            return self._cm
        with torch.no_grad():
            self._cm = self.weight.detach().t().contiguous().t()
        self._cm_key = _weight_key(self.weight)
        return self._cm

    def _int8_weight(self) -> kernels.Int8Weight:
        if self._int8 is not None and (_compiling() or self._int8_key == _weight_key(self.weight)):
            return self._int8
        with torch.no_grad():
            self._int8 = kernels.Int8Weight.quantize(self.weight.detach())
        self._int8_key = _weight_key(self.weight)
        return self._int8

    def release_copies(self) -> None:
        self._cm = self._cm_key = self._int8 = self._int8_key = None

    @property
    def extra_bytes(self) -> int:
        """Bytes held besides the row-major weight: the column-major decode copy and/or the int8 weight."""
        n = 0
        if self._cm is not None:
            n += self._cm.numel() * self._cm.element_size()
        if self._int8 is not None:
            q = self._int8
            n += q.qweight.numel() + q.scales.numel() * 4
            if q._packed is not None:
                n += q._packed.numel()
        return n

    # -- forward ------------------------------------------------------------------------------------------------------
    def _count(self, x_part: torch.Tensor) -> None:
        if self.track:
            self.zeroed += int((~active_mask(x_part, self._t)).sum())
            self.seen += x_part.numel()

    def _dense(self, x: torch.Tensor) -> torch.Tensor:
        """W x + b on the row-major weight (or the int8 weight), for any number of tokens."""
        if self.quantize != "int8":
            return F.linear(x, self.weight, self.bias)
        q = self._int8_weight()
        # y_j = scale_j * sum_k x_k q_jk; q^T is contiguous [in, out], so this is a plain row-major product
        y = torch.matmul(x, q.qweight.t().to(x.dtype)) * q.scales.to(x.dtype)
        return y if self.bias is None else y + self.bias

    def _decode(self, x: torch.Tensor) -> torch.Tensor:
        t = self._t
        be = self.decode_backend(x.device)
        if self.quantize == "int8":
            y = kernels.sparse_gemv_int8(x, self._int8_weight(), t, backend=be).to(x.dtype)
            return y if self.bias is None else y + self.bias
        if self.qkv_group is not None and be != "reference":
            return self.qkv_group.decode(self, x, be)
        weight = self.weight if be == "reference" else self._column_major()
        return kernels.sparse_gemv(x, weight, t, bias=self.bias, backend=be)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"input has {x.shape[-1]} features, expected {self.in_features}")
        t = self._t
        if x.numel() == self.in_features:  # a single decode token
            if t <= 0.0 and self.quantize is None:
                self._count(x)
                return F.linear(x, self.weight, self.bias)
            self._count(x)
            return self._decode(x)
        tokens = x.shape[-2] if x.dim() >= 2 else 1
        if t <= 0.0:
            self._count(x)
            return self._dense(x)
        if tokens == 1 or self.prefill == "all":  # [B, 1, d]: a decode step of a batch is sparsified
            self._count(x)
            return self._dense(sparsify_input(x, t))
        if self.prefill == "dense":
            return self._dense(x)
        keep = tokens - tokens // 2  # last_half: the first ceil(T/2) positions stay dense
        head, tail = x[..., :keep, :], x[..., keep:, :]
        self._count(tail)
        # one fused elementwise pass over the sparsified half (a mask + where costs ~10 % of a bf16 prefill GEMM)
        return self._dense(torch.cat([head, sparsify_input(tail, t)], dim=-2))

    def extra_repr(self) -> str:
        q = f", quantize={self.quantize!r}" if self.quantize else ""
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, threshold={self._t:.6g}, "
            f"prefill={self.prefill!r}, backend={self.backend!r}{q}"
        )


class QKVGroup:
    """Fused q/k/v decode for three ``TealLinear`` sharing one input (``apply_teal(fuse_qkv=True)``).

    Holds one stacked column-major copy of [W_q; W_k; W_v]. The first of q/k/v called on a decode token runs
    :func:`iclr25.teal.kernels.sparse_qkv_gemv` (one launch, three thresholds) and keeps the other two results for
    the calls that follow on the same input tensor; a call with another input recomputes, so results never go stale.
    """

    def __init__(self, members: tuple[TealLinear, TealLinear, TealLinear]):
        ins = {m.in_features for m in members}
        if len(ins) != 1 or len({m.weight.dtype for m in members}) != 1:
            raise ValueError("fused q/k/v needs three projections of one input width and one dtype")
        self.members = members
        self.sizes = tuple(m.out_features for m in members)
        self._cm: torch.Tensor | None = None
        self._key: tuple | None = None
        self._cache: tuple | None = None
        for m in members:
            m.release_copies()
            m.qkv_group = self

    def column_major(self) -> torch.Tensor:
        key = None if _compiling() else _weight_key(*(m.weight for m in self.members))
        if self._cm is None or (key is not None and key != self._key):
            with torch.no_grad():
                stacked = torch.cat([m.weight.detach() for m in self.members], dim=0)
                self._cm = stacked.t().contiguous().t()
            self._key = key
        return self._cm

    @property
    def extra_bytes(self) -> int:
        return 0 if self._cm is None else self._cm.numel() * self._cm.element_size()

    def decode(self, member: TealLinear, x: torch.Tensor, backend: str) -> torch.Tensor:
        i = self.members.index(member)
        c = self._cache
        if c is not None and c[0] is x and c[1] == x._version and i in c[3]:
            c[3].discard(i)
            y = c[2][i]
            if not c[3]:
                self._cache = None
        else:
            ts = tuple(m._t for m in self.members)
            fused = kernels.sparse_qkv_gemv(x, self.column_major(), ts, self.sizes, backend=backend)
            parts = torch.split(fused, list(self.sizes), dim=-1)
            self._cache = (x, x._version, parts, {0, 1, 2} - {i})
            y = parts[i]
        return y if member.bias is None else y + member.bias

    def release(self) -> None:
        self._cm = self._key = self._cache = None
        for m in self.members:
            m.qkv_group = None
