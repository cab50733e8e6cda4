"""Block-wise greedy sparsity allocation (TEAL §3.2; official teal/greedyopt.py).

Per block, with the dense block input X and dense output Y cached: start from s_p = 0 for the seven projections;
while the effective sparsity S_eff = sum_p w_p s_p / sum_p w_p is below the target, try raising each projection by its
step delta_p = base_step / w_p, evaluate the block error E = mean over (batch, channel) of the L2 norm over the last
25 % of sequence positions of Y - Y_hat, and commit the projection with the smallest error. Every committed step
raises S_eff by exactly base_step / sum_p w_p. Weights w_p are the projections' real parameter counts relative to q
(the official script hard-codes a table that is wrong for MHA models).

At inference every layer uses the row whose S_eff is closest to the requested level (same effective sparsity in every
block, redistributed across its seven matrices).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from iclr25.shared import atomic_write, progress

from .calibration import CalibrationResult, _check_batches, check_sparsity
from .config import DEFAULT_PREFILL, DEFAULT_THRESHOLD_MODE, PROJECTIONS, GreedyConfig
from .modules import check_token_ids, find_blocks, projection_param_counts
from .sparsify import SparsityPlan, apply_teal

CSV_HEADER = ["Effective Sparsity", "Activation Error", "Baseline Error", *PROJECTIONS]  # official column names
_EPS = 1e-9


@dataclass
class GreedyRow:
    effective: float
    error: float
    baseline_error: float
    levels: dict[str, float]
    chosen: str | None = None
    candidate_errors: dict[str, float] = field(default_factory=dict)


@dataclass
class GreedyTable:
    """The greedy trajectory of one block (one row per committed step)."""

    rows: list[GreedyRow]

    def closest(self, level: float) -> dict[str, float]:
        """Per-projection sparsities of the row whose effective sparsity is closest to ``level`` (0 -> dense)."""
        check_sparsity(level, "level")
        candidates = [GreedyRow(0.0, 0.0, 0.0, {p: 0.0 for p in PROJECTIONS}), *self.rows]
        best = min(candidates, key=lambda r: abs(r.effective - level))
        return dict(best.levels)

    def to_csv(self, path: str | Path) -> None:
        with atomic_write(path, "w") as fh:
            w = csv.writer(fh)
            w.writerow(CSV_HEADER)
            for r in self.rows:
                w.writerow(
                    [
                        repr(r.effective),
                        repr(r.error),
                        repr(r.baseline_error),
                        *(repr(r.levels[p]) for p in PROJECTIONS),
                    ]
                )

    @classmethod
    def from_csv(cls, path: str | Path) -> GreedyTable:
        """Read a table in the official CSV format (``lookup/layer-<i>/results.csv``)."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"no greedy table at {path}")
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in CSV_HEADER if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(f"{path} misses the official columns {missing}")
            rows = [
                GreedyRow(
                    effective=float(r["Effective Sparsity"]),
                    error=float(r["Activation Error"]),
                    baseline_error=float(r["Baseline Error"]),
                    levels={p: float(r[p]) for p in PROJECTIONS},
                )
                for r in reader
            ]
        return cls(rows)


def block_error(reference: torch.Tensor, output: torch.Tensor, last_fraction: float = 0.25) -> float:
    """Official block error: L2 norm over the last ``last_fraction`` of sequence positions, mean over the rest."""
    if not 0 < last_fraction <= 1:
        raise ValueError(f"last_fraction must lie in (0, 1], got {last_fraction}")
    start = int(output.shape[1] * (1 - last_fraction))  # < T for last_fraction > 0: at least one position
    return float(torch.linalg.vector_norm((reference[:, start:] - output[:, start:]).double(), dim=1).mean())


def greedy_block_allocation(
    block_forward: Callable[[Mapping[str, float]], torch.Tensor],
    weights: Mapping[str, float],
    config: GreedyConfig | None = None,
    *,
    reference: torch.Tensor | None = None,
) -> GreedyTable:
    """Greedy allocation for one block.

    ``block_forward(levels)`` runs the block on its cached input with per-projection sparsities ``levels`` and returns
    the block output ``[B, T, d]``; ``weights`` are the projections' parameter counts relative to q.
    """
    cfg = config or GreedyConfig()
    if set(weights) != set(PROJECTIONS) or any(w <= 0 for w in weights.values()):
        raise ValueError(f"weights must give a positive weight for each of {PROJECTIONS}, got {dict(weights)}")
    total_w = sum(weights.values())
    step = {p: cfg.base_step / weights[p] for p in PROJECTIONS}
    n_steps = {p: 0 for p in PROJECTIONS}

    def levels_of(counts):
        return {p: counts[p] * step[p] for p in PROJECTIONS}

    def effective(counts):
        return sum(counts.values()) * cfg.base_step / total_w

    if reference is None:
        reference = block_forward(levels_of(n_steps))
    rows = []
    while effective(n_steps) < cfg.target - _EPS:
        errors = {}
        for p in PROJECTIONS:
            trial = dict(n_steps)
            trial[p] += 1
            if trial[p] * step[p] >= 1 - _EPS:  # keep every level in [0, 1)
                continue
            errors[p] = block_error(reference, block_forward(levels_of(trial)), cfg.last_fraction)
        if not errors:
            break
        best = min(errors, key=errors.get)  # first projection (official order) with the smallest error
        n_steps[best] += 1
        s_eff = effective(n_steps)
        baseline = block_error(reference, block_forward({p: s_eff for p in PROJECTIONS}), cfg.last_fraction)
        rows.append(GreedyRow(s_eff, errors[best], baseline, levels_of(n_steps), best, errors))
    return GreedyTable(rows)


def projection_weights(model: nn.Module, layer: int = 0) -> dict[str, float]:
    """Parameter count of each projection of ``layer`` relative to q (official ``weight_dict``, computed)."""
    counts = projection_param_counts(model)
    return {p: counts[(layer, p)] / counts[(layer, "q")] for p in PROJECTIONS}


@torch.no_grad()
def capture_block_inputs(model: nn.Module, input_ids: torch.Tensor) -> dict[int, tuple[tuple, dict]]:
    """The (args, kwargs) each decoder layer receives in one dense forward pass on ``input_ids`` (cached)."""
    blocks = find_blocks(model)
    captured: dict[int, tuple[tuple, dict]] = {}
    hooks = []

    def make_hook(i):
        def hook(_mod, args, kwargs):
            captured[i] = (tuple(args), dict(kwargs))

        return hook

    for b in blocks:
        hooks.append(b.layer.register_forward_pre_hook(make_hook(b.index), with_kwargs=True))
    try:
        model(input_ids=input_ids.to(next(model.parameters()).device), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return captured


def _layer_output(out) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


@torch.no_grad()
def greedy_allocation(
    model: nn.Module,
    calibration: CalibrationResult,
    batches: Iterable[torch.Tensor],
    config: GreedyConfig | None = None,
    *,
    prefill: str = DEFAULT_PREFILL,
    mode: str = DEFAULT_THRESHOLD_MODE,
    layers: Iterable[int] | None = None,
) -> dict[int, GreedyTable]:
    """Greedy tables for every block of ``model`` (dense block inputs cached from one pass over ``batches``)."""
    cfg = config or GreedyConfig()
    batches = _check_batches(batches)
    if len({b.shape[1] for b in batches}) != 1:
        raise ValueError("greedy batches must share one sequence length")
    input_ids = torch.cat(batches)
    check_token_ids(model, input_ids, "greedy batches")
    inputs = capture_block_inputs(model, input_ids)
    weights = projection_weights(model)
    handle = apply_teal(model, calibration, SparsityPlan.uniform(0.0), prefill=prefill, backend="reference", mode=mode)
    blocks = find_blocks(model)
    tables = {}
    try:
        for i in progress(list(layers) if layers is not None else range(len(blocks)), desc="greedy"):
            args, kwargs = inputs[i]

            def block_forward(levels, i=i, args=args, kwargs=kwargs):
                handle.set_layer_levels(i, levels)
                return _layer_output(blocks[i].layer(*args, **kwargs))

            tables[i] = greedy_block_allocation(block_forward, weights, cfg)
            handle.set_layer_levels(i, {p: 0.0 for p in PROJECTIONS})
    finally:
        handle.remove()
    return tables


def save_tables(tables: Mapping[int, GreedyTable], directory: str | Path) -> None:
    """Official layout: ``<dir>/layer-<i>/results.csv``."""
    for i, t in tables.items():
        t.to_csv(Path(directory) / f"layer-{i}" / "results.csv")


def load_tables(directory: str | Path) -> dict[int, GreedyTable]:
    directory = Path(directory)
    files = sorted(directory.glob("layer-*/results.csv"), key=lambda p: int(p.parent.name[6:]))
    if not files:
        raise ValueError(f"{directory} holds no layer-<i>/results.csv tables")
    return {int(f.parent.name[6:]): GreedyTable.from_csv(f) for f in files}
