"""Applying TEAL to a model: ``TealLinear`` wrappers on the seven projections of every block, reversibly.

``apply_teal`` binds a calibration (checked against the model's fingerprint) and a ``SparsityPlan`` (checked against
its layers) to the model; ``TealHandle.save`` / ``load_teal`` persist the resulting thresholds (safetensors + JSON
with the fingerprint). See :mod:`iclr25.teal.teal_linear` for what each forward call computes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from torch import nn

from iclr25.shared import atomic_write

from .calibration import CalibrationResult, _check_batches, check_sparsity
from .config import DEFAULT_PREFILL, DEFAULT_THRESHOLD_MODE, PROJECTIONS, THRESHOLD_MODES
from .modules import check_token_ids, find_blocks, fingerprint_mismatch, model_fingerprint, projection_param_counts
from .teal_linear import QKVGroup, TealLinear, check_options

THRESHOLDS_FILE = "teal_thresholds.safetensors"
CONFIG_FILE = "teal_config.json"
THRESHOLDS_FORMAT = "iclr25.teal.thresholds"
THRESHOLDS_VERSION = 1


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

    def check_layers(self, num_layers: int) -> None:
        """Raise ``ValueError`` if the plan names a layer outside ``0 .. num_layers - 1``."""
        bad = sorted(layer for layer in self.levels if not 0 <= layer < num_layers)
        if bad:
            raise ValueError(f"the plan names layers {bad} but the model has {num_layers} layers (0..{num_layers - 1})")

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


class TealHandle:
    """The wrappers installed by :func:`apply_teal` / :func:`load_teal`; ``remove()`` puts the original linears back."""

    def __init__(self, model, wrappers, parents, calibration, mode, *, prefill, fuse_qkv, quantize, groups=()):
        self.model = model
        self.wrappers: dict[tuple[int, str], TealLinear] = wrappers
        self._parents = parents
        self.calibration = calibration
        self.mode = mode
        self.prefill = prefill
        self.fuse_qkv = fuse_qkv
        self.quantize = quantize
        self.groups: list[QKVGroup] = list(groups)
        self.fingerprint = model_fingerprint(model)
        self.removed = False

    def _need_calibration(self) -> CalibrationResult:
        if self.calibration is None:
            raise ValueError(
                "these thresholds were loaded from disk without a calibration; pass a CalibrationResult to "
                "apply_teal to change the sparsity plan"
            )
        return self.calibration

    def set_plan(self, plan: SparsityPlan) -> None:
        """Re-threshold every wrapper for a new plan (no re-wrapping)."""
        calib = self._need_calibration()
        if not isinstance(plan, SparsityPlan):
            raise TypeError(f"plan must be a SparsityPlan, got {type(plan).__name__}")
        plan.check_layers(self.fingerprint["num_layers"])
        for (layer, proj), w in self.wrappers.items():
            w.set_threshold(calib.threshold(layer, proj, plan.sparsity(layer, proj), self.mode))

    def set_layer_levels(self, layer: int, levels: Mapping[str, float]) -> None:
        calib = self._need_calibration()
        for proj, s in levels.items():
            if (layer, proj) not in self.wrappers:
                raise ValueError(f"the model has no projection {proj!r} in layer {layer}")
            self.wrappers[(layer, proj)].set_threshold(calib.threshold(layer, proj, s, self.mode))

    def thresholds(self) -> dict[tuple[int, str], float]:
        return {k: w._t for k, w in self.wrappers.items()}

    def extra_bytes(self) -> int:
        """Memory held besides the model's own weights: column-major decode copies and int8 weights (bytes)."""
        return sum(w.extra_bytes for w in self.wrappers.values()) + sum(g.extra_bytes for g in self.groups)

    def save(self, directory: str | Path) -> None:
        """Write the thresholds (``teal_thresholds.safetensors``, float64 ``[layers, 7]``) and ``teal_config.json``
        (format, model fingerprint, projection order, prefill, mode, fuse_qkv, quantize, sha256 of the tensor file).
        Both files are written atomically; :func:`load_teal` reads them back with checks."""
        from safetensors.torch import save as st_save

        if self.removed:
            raise ValueError("this TEAL handle was removed; nothing to save")
        n = self.fingerprint["num_layers"]
        table = torch.zeros(n, len(PROJECTIONS), dtype=torch.float64)
        for (layer, proj), w in self.wrappers.items():
            table[layer, PROJECTIONS.index(proj)] = w._t
        blob = st_save({"thresholds": table}, metadata={"format": THRESHOLDS_FORMAT})
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_write(directory / THRESHOLDS_FILE, "wb") as fh:
            fh.write(blob)
        config = {
            "format": THRESHOLDS_FORMAT,
            "version": THRESHOLDS_VERSION,
            "projections": list(PROJECTIONS),
            "prefill": self.prefill,
            "mode": self.mode,
            "fuse_qkv": self.fuse_qkv,
            "quantize": self.quantize,
            "thresholds_sha256": hashlib.sha256(blob).hexdigest(),
            "fingerprint": self.fingerprint,
        }
        with atomic_write(directory / CONFIG_FILE, "w") as fh:
            json.dump(config, fh, indent=1)

    def remove(self) -> None:
        """Restore the original ``nn.Linear`` modules (same weight tensors): the model is exactly dense again."""
        if self.removed:
            return
        for g in self.groups:
            g.release()
        for key, w in self.wrappers.items():
            parent, name = self._parents[key]
            lin = w.linear
            w.release_copies()
            setattr(parent, name, lin)
        self.removed = True

    def __enter__(self) -> TealHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _install(model, thresholds, *, prefill, backend, quantize, fuse_qkv):
    """Wrap every projection with its threshold; returns (wrappers, parents, groups)."""
    check_options(prefill, backend, quantize)  # before anything is wrapped
    if fuse_qkv and quantize is not None:
        raise ValueError("fuse_qkv=True and quantize='int8' cannot be combined (there is no fused int8 q/k/v kernel)")
    blocks = find_blocks(model)
    if any(isinstance(m, TealLinear) for m in model.modules()):
        raise ValueError("TEAL is already applied to this model; call handle.remove() first")
    wrappers, parents, groups = {}, {}, []
    for b in blocks:
        for proj in PROJECTIONS:
            parent, name = b.parents[proj]
            lin = getattr(parent, name)
            if not isinstance(lin, nn.Linear):
                raise ValueError(f"layer {b.index} {proj} is a {type(lin).__name__}, TEAL wraps nn.Linear projections")
            w = TealLinear(lin, thresholds[(b.index, proj)], prefill=prefill, backend=backend, quantize=quantize)
            setattr(parent, name, w)
            wrappers[(b.index, proj)] = w
            parents[(b.index, proj)] = (parent, name)
        if fuse_qkv:
            group = QKVGroup(tuple(wrappers[(b.index, p)] for p in ("q", "k", "v")))
            if group.members[0].decode_backend(group.members[0].weight.device) != "reference":
                group.column_major()
            groups.append(group)
    return wrappers, parents, groups


def apply_teal(
    model: nn.Module,
    calibration: CalibrationResult,
    plan: SparsityPlan,
    *,
    prefill: str = DEFAULT_PREFILL,
    backend: str = "auto",
    mode: str = DEFAULT_THRESHOLD_MODE,
    fuse_qkv: bool = False,
    quantize: str | None = None,
) -> TealHandle:
    """Wrap the seven projections of every block with calibrated thresholds for ``plan``; returns a handle.

    ``fuse_qkv=True`` computes q, k and v of a decode token with one fused kernel (one stacked column-major copy of
    W_q/W_k/W_v, three thresholds); ``quantize="int8"`` computes every projection with per-output-channel int8
    weights (decode through the int8 sparse kernel). The calibration must come from this model (same fingerprint)
    and the plan may only name layers the model has.
    """
    if not isinstance(calibration, CalibrationResult):
        raise TypeError(f"calibration must be a CalibrationResult, got {type(calibration).__name__}")
    if not isinstance(plan, SparsityPlan):
        raise TypeError(f"plan must be a SparsityPlan, got {type(plan).__name__}")
    if mode not in THRESHOLD_MODES:
        raise ValueError(f"mode must be one of {THRESHOLD_MODES}, got {mode!r}")
    calibration.check_model(model)
    plan.check_layers(calibration.num_layers)
    thresholds = {
        (layer, proj): calibration.threshold(layer, proj, plan.sparsity(layer, proj), mode)
        for layer in range(calibration.num_layers)
        for proj in PROJECTIONS
    }
    wrappers, parents, groups = _install(
        model, thresholds, prefill=prefill, backend=backend, quantize=quantize, fuse_qkv=fuse_qkv
    )
    return TealHandle(
        model, wrappers, parents, calibration, mode, prefill=prefill, fuse_qkv=fuse_qkv, quantize=quantize,
        groups=groups,
    )  # fmt: skip


def load_teal(
    model: nn.Module,
    directory: str | Path,
    *,
    backend: str = "auto",
    prefill: str | None = None,
    fuse_qkv: bool | None = None,
    quantize: str | None | bool = False,
) -> TealHandle:
    """Apply thresholds written by :meth:`TealHandle.save` to ``model`` (which must match the saved fingerprint).

    ``prefill``, ``fuse_qkv`` and ``quantize`` default to the saved values (``quantize=False`` means "as saved").
    """
    from safetensors import SafetensorError
    from safetensors.torch import load as st_load

    directory = Path(directory)
    cfg_path, st_path = directory / CONFIG_FILE, directory / THRESHOLDS_FILE
    for f in (cfg_path, st_path):
        if not f.is_file():
            raise ValueError(f"no TEAL thresholds at {directory}: {f.name} is missing (write them with handle.save)")
    try:
        config = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cfg_path} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict) or config.get("format") != THRESHOLDS_FORMAT:
        raise ValueError(f"{cfg_path} is not an iclr25.teal thresholds config")
    if config.get("version") != THRESHOLDS_VERSION:
        raise ValueError(f"{cfg_path} has version {config.get('version')}, expected {THRESHOLDS_VERSION}")
    if config.get("projections") != list(PROJECTIONS):
        raise ValueError(f"{cfg_path} lists projections {config.get('projections')}, expected {list(PROJECTIONS)}")
    blob = st_path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != config.get("thresholds_sha256"):
        raise ValueError(f"{st_path} does not match the checksum in {cfg_path} (a partial or foreign file)")
    try:
        table = st_load(blob).get("thresholds")
    except SafetensorError as exc:
        raise ValueError(f"{st_path} is not a readable safetensors file: {exc}") from exc
    diff = fingerprint_mismatch(config.get("fingerprint") or {}, model_fingerprint(model))
    if diff:
        raise ValueError(f"these thresholds were saved for a different model ({diff})")
    n = config["fingerprint"]["num_layers"]
    if table is None or tuple(table.shape) != (n, len(PROJECTIONS)):
        raise ValueError(f"{st_path} must hold 'thresholds' of shape ({n}, {len(PROJECTIONS)})")
    if not bool((table >= 0).all()):  # also false for NaN
        raise ValueError(f"{st_path} holds negative or NaN thresholds")
    thresholds = {(i, p): float(table[i, j]) for i in range(n) for j, p in enumerate(PROJECTIONS)}
    prefill = config.get("prefill", DEFAULT_PREFILL) if prefill is None else prefill
    fuse = bool(config.get("fuse_qkv", False)) if fuse_qkv is None else fuse_qkv
    quant = config.get("quantize") if quantize is False else quantize
    wrappers, parents, groups = _install(
        model, thresholds, prefill=prefill, backend=backend, quantize=quant, fuse_qkv=fuse
    )
    return TealHandle(
        model, wrappers, parents, None, config.get("mode", DEFAULT_THRESHOLD_MODE), prefill=prefill, fuse_qkv=fuse,
        quantize=quant, groups=groups,
    )  # fmt: skip


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
    for i, b in enumerate(batches):
        check_token_ids(model, b, f"batch {i}")
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
