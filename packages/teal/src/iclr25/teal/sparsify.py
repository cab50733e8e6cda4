"""Applying TEAL to a model: ``TealLinear`` wrappers on the seven projections of every block, reversibly.

``TealLinear`` computes W (x * 1[|x| > t]) + b with a calibrated scalar threshold t (a buffer, fixed at inference).
Prefill positions follow ``prefill``: ``"last_half"`` (official evaluation convention: only the last floor(T/2)
positions are sparsified), ``"dense"`` (serving: prefill stays dense) or ``"all"``. A decode step (one token) is
always sparsified; with batch 1 it goes through :func:`iclr25.teal.kernels.sparse_gemv`, which never reads the weight
columns of inactive channels (``backend="reference"`` keeps the mask-then-dense simulation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.shared import resolve_backend

from .calibration import CalibrationResult, _check_batches, check_sparsity
from .config import DEFAULT_PREFILL, DEFAULT_THRESHOLD_MODE, PREFILL_MODES, PROJECTIONS, THRESHOLD_MODES
from .kernels.column_skip import column_skip_gemv
from .kernels.reference import active_mask
from .modules import find_blocks, projection_param_counts

LINEAR_BACKENDS = ("auto", "torch", "triton", "reference")
# backend="auto" on CPU: below this weight size the per-call overhead of building the active-channel index (~0.1 ms)
# outweighs the skipped bytes, and small weights may sit in cache (measured: the 16-128 KB matrices of the shipped
# small model decode 1.6-1.8x slower with column skipping; a 4 MB 512x2048 fp32 k_proj 2.3x slower).
CPU_SKIP_MIN_BYTES = 8 << 20


class SparsityPlan:
    """Target sparsity per (layer, projection): a uniform level, optionally overridden per layer.

    >>> SparsityPlan.uniform(0.5).sparsity(3, "q")
    0.5
    """

    def __init__(self, levels: Mapping[int, Mapping[str, float]] | None = None, default: float = 0.0):
        self.default = check_sparsity(default, "default sparsity")
        self.levels: dict[int, dict[str, float]] = {}
        for layer, per_proj in (levels or {}).items():
            unknown = set(per_proj) - set(PROJECTIONS)
            if unknown:
                raise ValueError(f"unknown projections {sorted(unknown)} in layer {layer}; expected {PROJECTIONS}")
            self.levels[int(layer)] = {
                p: check_sparsity(s, f"sparsity of layer {layer} {p}") for p, s in per_proj.items()
            }

    @classmethod
    def uniform(cls, sparsity: float) -> SparsityPlan:
        """The same sparsity for every projection of every layer."""
        return cls(default=sparsity)

    @classmethod
    def from_greedy(cls, tables: Mapping[int, object], level: float) -> SparsityPlan:
        """Official inference rule: in every layer, the greedy row whose effective sparsity is closest to ``level``."""
        check_sparsity(level, "level")
        if not tables:
            raise ValueError("from_greedy needs one GreedyTable per layer")
        return cls({layer: table.closest(level) for layer, table in tables.items()})

    def sparsity(self, layer: int, proj: str) -> float:
        return self.levels.get(layer, {}).get(proj, self.default)

    def effective_sparsity(self, param_counts: Mapping[tuple[int, str], int]) -> float:
        """Model-wide sparsity: the parameter-weighted mean sum_p n_p s_p / sum_p n_p over all projections."""
        total = sum(param_counts.values())
        if total <= 0:
            raise ValueError("param_counts must hold positive parameter counts")
        return sum(n * self.sparsity(layer, p) for (layer, p), n in param_counts.items()) / total

    def __repr__(self) -> str:
        return f"SparsityPlan(default={self.default}, layers={sorted(self.levels)})"


class TealLinear(nn.Module):
    """``nn.Linear`` with TEAL input sparsification (threshold buffer, prefill policy, decode kernel backend)."""

    def __init__(
        self,
        linear: nn.Linear,
        threshold: float = 0.0,
        *,
        prefill: str = DEFAULT_PREFILL,
        backend: str = "auto",
    ):
        super().__init__()
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"TealLinear wraps an nn.Linear, got {type(linear).__name__}")
        if prefill not in PREFILL_MODES:
            raise ValueError(f"prefill must be one of {PREFILL_MODES}, got {prefill!r}")
        if backend not in LINEAR_BACKENDS:
            raise ValueError(f"backend must be one of {LINEAR_BACKENDS}, got {backend!r}")
        self.linear = linear
        self.prefill = prefill
        self.backend = backend
        self.register_buffer("threshold", torch.zeros((), dtype=torch.float32), persistent=True)
        self._t = 0.0
        self.set_threshold(threshold)
        self._resolved, self._resolved_for, self._triton_fn = "reference", None, None
        self.track = False
        self.zeroed = 0
        self.seen = 0

    @property
    def in_features(self) -> int:
        return self.linear.in_features

    @property
    def out_features(self) -> int:
        return self.linear.out_features

    def set_threshold(self, threshold: float) -> None:
        t = float(threshold)
        if not t >= 0.0:
            raise ValueError(f"threshold must be a non-negative number, got {threshold}")
        self.threshold.fill_(t)
        self._t = t
        if t > 0 and self.backend != "reference":
            self._prepare_weight()

    def _prepare_weight(self) -> None:
        """Store W column-major (W^T contiguous) so a skipped input channel is a skipped contiguous weight row."""
        w = self.linear.weight
        if w.dim() == 2 and w.stride(0) != 1 and w.shape[0] > 1 and w.shape[1] > 1:
            w.data = w.data.t().contiguous().t()

    def restore_weight(self) -> None:
        """Back to the row-major layout of a plain ``nn.Linear`` (same values)."""
        w = self.linear.weight
        if not w.is_contiguous():
            w.data = w.data.contiguous()

    def _decode_backend(self, x: torch.Tensor) -> str:
        """ "reference" (mask, then dense), "torch" (column skipping) or "triton" for a decode token on x's device.

        Resolved once per device (not per call), so a compiled decode step sees a constant branch.
        """
        device = x.device.type
        if self._resolved_for != device:
            be = "reference" if self.backend == "reference" else resolve_backend(x, self.backend)
            if be == "torch" and self.backend == "auto" and device == "cpu":
                w = self.linear.weight
                if w.numel() * w.element_size() < CPU_SKIP_MIN_BYTES:
                    be = "reference"
            if be == "triton":  # the Triton module is imported only now (triton.jit runs at its import)
                from .kernels.splitk_sparse_gemv import sparse_gemv_triton

                self._triton_fn = sparse_gemv_triton
            self._resolved, self._resolved_for = be, device
        return self._resolved

    def _count(self, x_part: torch.Tensor) -> None:
        if self.track:
            self.zeroed += int((~active_mask(x_part, self._t)).sum())
            self.seen += x_part.numel()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self._t
        if t <= 0.0:
            if self.track:
                self._count(x)
            return self.linear(x)
        tokens = x.shape[-2] if x.dim() >= 3 else 1
        if tokens == 1 or x.dim() < 3:
            self._count(x)
            be = self._decode_backend(x) if x.numel() == self.in_features else "reference"
            if be == "triton":
                y = self._triton_fn(x.reshape(-1), self.linear.weight, t, self.linear.bias)
                return y.reshape(*x.shape[:-1], self.out_features)
            if be == "torch":
                y = column_skip_gemv(x.reshape(-1), self.linear.weight, t, self.linear.bias)
                return y.reshape(*x.shape[:-1], self.out_features)
            return F.linear(x * active_mask(x, t), self.linear.weight, self.linear.bias)
        if self.prefill == "dense":
            return self.linear(x)
        mask = active_mask(x, t)
        if self.prefill == "last_half":
            keep = tokens - tokens // 2  # the first ceil(T/2) positions stay dense
            mask[..., :keep, :] = True
            self._count(x[..., keep:, :])
        else:
            self._count(x)
        return F.linear(x * mask, self.linear.weight, self.linear.bias)

    def extra_repr(self) -> str:
        return f"threshold={self._t:.6g}, prefill={self.prefill!r}, backend={self.backend!r}"


class TealHandle:
    """The wrappers installed by :func:`apply_teal`; ``remove()`` puts the original linears back."""

    def __init__(self, model: nn.Module, wrappers: dict[tuple[int, str], TealLinear], parents, calibration, mode):
        self.model = model
        self.wrappers = wrappers
        self._parents = parents
        self.calibration = calibration
        self.mode = mode
        self.removed = False

    def set_plan(self, plan: SparsityPlan) -> None:
        """Re-threshold every wrapper for a new plan (no re-wrapping)."""
        for (layer, proj), w in self.wrappers.items():
            w.set_threshold(self.calibration.threshold(layer, proj, plan.sparsity(layer, proj), self.mode))

    def set_layer_levels(self, layer: int, levels: Mapping[str, float]) -> None:
        for proj, s in levels.items():
            self.wrappers[(layer, proj)].set_threshold(self.calibration.threshold(layer, proj, s, self.mode))

    def thresholds(self) -> dict[tuple[int, str], float]:
        return {k: w._t for k, w in self.wrappers.items()}

    def remove(self) -> None:
        """Restore the original ``nn.Linear`` modules (row-major weights): the model is exactly dense again."""
        if self.removed:
            return
        for key, w in self.wrappers.items():
            parent, name = self._parents[key]
            w.restore_weight()
            setattr(parent, name, w.linear)
        self.removed = True

    def __enter__(self) -> TealHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def apply_teal(
    model: nn.Module,
    calibration: CalibrationResult,
    plan: SparsityPlan,
    *,
    prefill: str = DEFAULT_PREFILL,
    backend: str = "auto",
    mode: str = DEFAULT_THRESHOLD_MODE,
) -> TealHandle:
    """Wrap the seven projections of every block with calibrated thresholds for ``plan``; returns a handle."""
    if not isinstance(calibration, CalibrationResult):
        raise TypeError(f"calibration must be a CalibrationResult, got {type(calibration).__name__}")
    if not isinstance(plan, SparsityPlan):
        raise TypeError(f"plan must be a SparsityPlan, got {type(plan).__name__}")
    if mode not in THRESHOLD_MODES:
        raise ValueError(f"mode must be one of {THRESHOLD_MODES}, got {mode!r}")
    blocks = find_blocks(model)
    if any(isinstance(m, TealLinear) for m in model.modules()):
        raise ValueError("TEAL is already applied to this model; call handle.remove() first")
    if calibration.num_layers != len(blocks):
        raise ValueError(f"calibration has {calibration.num_layers} layers but the model has {len(blocks)}")
    wrappers, parents = {}, {}
    for b in blocks:
        for proj in PROJECTIONS:
            t = calibration.threshold(b.index, proj, plan.sparsity(b.index, proj), mode)
            parent, name = b.parents[proj]
            w = TealLinear(getattr(parent, name), t, prefill=prefill, backend=backend)
            w._decode_backend(w.linear.weight)  # resolve the decode kernel now, outside any compiled region
            setattr(parent, name, w)
            wrappers[(b.index, proj)] = w
            parents[(b.index, proj)] = (parent, name)
    return TealHandle(model, wrappers, parents, calibration, mode)


@torch.no_grad()
def measure_realized_sparsity(model: nn.Module, batches: Iterable[torch.Tensor]) -> dict[tuple[int, str], float]:
    """Fraction of projection inputs at or below their threshold on ``batches`` (every position sparsified).

    Needs a model with TEAL applied. Returns ``{(layer, proj): fraction}``; see :func:`model_wide_sparsity`.
    """
    wrappers = {}
    for b in find_blocks(model):
        for p in PROJECTIONS:
            m = b.module(p)
            if not isinstance(m, TealLinear):
                raise ValueError("measure_realized_sparsity needs a model with TEAL applied (apply_teal)")
            wrappers[(b.index, p)] = m
    batches = _check_batches(batches)
    saved = {k: w.prefill for k, w in wrappers.items()}
    device = next(model.parameters()).device
    try:
        for w in wrappers.values():
            w.prefill, w.track, w.zeroed, w.seen = "all", True, 0, 0
        for batch in batches:
            model(input_ids=batch.to(device), use_cache=False)
        return {k: w.zeroed / max(w.seen, 1) for k, w in wrappers.items()}
    finally:
        for k, w in wrappers.items():
            w.prefill, w.track = saved[k], False


def model_wide_sparsity(levels: Mapping[tuple[int, str], float], model_or_counts) -> float:
    """Parameter-weighted mean of per-projection sparsities (realized or planned)."""
    counts = model_or_counts if isinstance(model_or_counts, Mapping) else projection_param_counts(model_or_counts)
    total = sum(counts[k] for k in levels)
    return sum(counts[k] * s for k, s in levels.items()) / total
