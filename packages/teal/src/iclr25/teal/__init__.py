"""TEAL: training-free activation sparsity in LLMs (Liu et al., ICLR 2025).

Magnitude-threshold the input of each of the seven linear projections of every transformer block with a calibrated
per-(layer, projection) threshold; at decode time the zeroed input channels select weight columns that need not be
read (:mod:`iclr25.teal.kernels`).

>>> from iclr25.teal import calibrate, apply_teal, SparsityPlan          # doctest: +SKIP
>>> calib = calibrate(model, batches)                                     # doctest: +SKIP
>>> handle = apply_teal(model, calib, SparsityPlan.uniform(0.5))          # doctest: +SKIP
>>> handle.remove()                                                       # doctest: +SKIP
"""

from .calibration import ActivationHistogram, CalibrationResult, calibrate, capture_activations, load_teal_histograms
from .config import PROJECTIONS, CalibrationConfig, EvalConfig, GreedyConfig
from .evaluation import PerplexityResult, check_disjoint, sliding_window_ppl
from .greedy import (
    GreedyRow,
    GreedyTable,
    block_error,
    greedy_allocation,
    greedy_block_allocation,
    load_tables,
    projection_weights,
    save_tables,
)
from .modules import find_blocks, model_fingerprint, projection_param_counts
from .sparsify import (
    SparsityPlan,
    TealHandle,
    apply_teal,
    load_teal,
    measure_realized_sparsity,
    model_wide_sparsity,
)
from .teal_linear import TealLinear

__version__ = "0.1.0"

__all__ = [
    "PROJECTIONS",
    "ActivationHistogram",
    "CalibrationConfig",
    "CalibrationResult",
    "EvalConfig",
    "GreedyConfig",
    "GreedyRow",
    "GreedyTable",
    "PerplexityResult",
    "SparsityPlan",
    "TealHandle",
    "TealLinear",
    "__version__",
    "apply_teal",
    "block_error",
    "calibrate",
    "capture_activations",
    "check_disjoint",
    "find_blocks",
    "greedy_allocation",
    "greedy_block_allocation",
    "load_tables",
    "load_teal",
    "load_teal_histograms",
    "measure_realized_sparsity",
    "model_fingerprint",
    "model_wide_sparsity",
    "projection_param_counts",
    "projection_weights",
    "save_tables",
    "sliding_window_ppl",
]
