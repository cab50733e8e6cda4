"""Defaults of TEAL (Liu et al., ICLR 2025). Every value cites its source.

"official" = FasterDecoding/TEAL at commit 5baaec8 (files named per value); "paper" = the ICLR 2025 paper.
"""

from __future__ import annotations

from dataclasses import dataclass

# The seven sparsified projections of a Llama/Mistral/Qwen2 block, in the official order (teal/greedyopt.py `projs`).
PROJECTIONS: tuple[str, ...] = ("q", "k", "v", "o", "gate", "up", "down")

# transformers attribute names: (parent submodule, linear name) per projection.
MODULE_NAMES: dict[str, tuple[str, str]] = {
    "q": ("self_attn", "q_proj"),
    "k": ("self_attn", "k_proj"),
    "v": ("self_attn", "v_proj"),
    "o": ("self_attn", "o_proj"),
    "gate": ("mlp", "gate_proj"),
    "up": ("mlp", "up_proj"),
    "down": ("mlp", "down_proj"),
}

# The four activation distributions and which projections read them (paper §3; official teal/mlp.py, self_attn.py):
# attn h1 = RMSNorm(h) -> q, k, v; attn h2 = attention output -> o; mlp h1 = RMSNorm(h') -> gate, up;
# mlp h2 = SiLU(gate) * up -> down.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "attn_h1": ("q", "k", "v"),
    "attn_h2": ("o",),
    "mlp_h1": ("gate", "up"),
    "mlp_h2": ("down",),
}
DISTRIBUTION_OF: dict[str, str] = {p: d for d, ps in DISTRIBUTIONS.items() for p in ps}
# The projection whose input hook captures each distribution.
CAPTURE_PROJECTION: dict[str, str] = {d: ps[0] for d, ps in DISTRIBUTIONS.items()}

THRESHOLD_MODES = ("teal_symmetric", "abs_quantile")
PREFILL_MODES = ("last_half", "dense", "all")


@dataclass(frozen=True)
class CalibrationConfig:
    """Histogram calibration (official utils/utils.py `ActivationModule.find_histogram`)."""

    num_bins: int = 10_000  # official find_histogram(num_bins=10000)
    outlier_fraction: float = 0.01  # official outlier_threshold=0.01: inner edges at the 1 % / 99 % order statistics
    # Exact |x| quantiles are stored on a grid of this many levels (ours; 1e-4 resolution in sparsity).
    num_abs_quantiles: int = 10_001
    # Cap on the values kept per distribution (ours; a seeded random subsample beyond it, to bound host memory: a
    # 7B model calibrated on 20k tokens would otherwise hold ~29 GB of mlp-h2 values). The official code keeps all.
    max_values: int = 8_000_000
    seed: int = 0


@dataclass(frozen=True)
class GreedyConfig:
    """Block-wise greedy allocation (official teal/greedyopt.py argparse defaults)."""

    base_step: float = 0.05  # --base_step_size 0.05 (scripts/greedyopt.bash uses 0.025)
    target: float = 0.9  # --target_sparsity 0.9
    last_fraction: float = 0.25  # --last_fraction 0.25: block error over the last 25 % of positions

    def __post_init__(self):
        for name in ("base_step", "target", "last_fraction"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
                raise ValueError(f"GreedyConfig.{name} must be a number, got {v!r}")
        if not 0 < self.base_step < 1:
            raise ValueError(f"GreedyConfig.base_step must lie in (0, 1), got {self.base_step}")
        if not 0 < self.target < 1:
            raise ValueError(f"GreedyConfig.target must lie in (0, 1), got {self.target}")
        if not 0 < self.last_fraction <= 1:
            raise ValueError(f"GreedyConfig.last_fraction must lie in (0, 1], got {self.last_fraction}")


@dataclass(frozen=True)
class EvalConfig:
    """Sliding-window perplexity (official utils/eval_ppl.py: 2,048 tokens of context, 512 scored per window)."""

    context: int = 2048
    window: int = 512


DEFAULT_PREFILL = "last_half"  # official SparsifyFn(apply_prefill=True): the last floor(T/2) positions are sparsified
DEFAULT_THRESHOLD_MODE = "teal_symmetric"  # official Distribution.icdf(0.5 + s/2)
