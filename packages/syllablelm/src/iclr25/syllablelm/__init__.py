"""SyllableLM (Baade, Peng, Harwath, ICLR 2025): syllable-like speech units and a unit language model.

Part 1 (units): LossPred boundaries from a masked-prediction teacher, SylBoost distillation and segmentation with the
official rate control, syllable units (pooling, k-means, Ward merge, deduplication), boundary/cluster metrics, and a
synthetic speech corpus with exact syllable times.
"""

from .config import RATE_PRESETS, LossPredConfig, SegmentConfig, SylBoostConfig, UnitConfig
from .losspred import MaskedPredictionTeacher, loss_matrix, loss_to_affinity, losspred_segment, mask_schedule
from .metrics import bitrate, boundary_scores, clustering_scores, r_value, tune_shift
from .segment import (
    backtrack,
    calibrate_delta,
    mincut_segment,
    ncut_costs,
    optimal_segmentation,
    select_num_segments,
    sse_costs,
    sylboost_segment,
)
from .sylboost import BertAdam, SylBoostTrainer, segment_targets, sylboost_loss
from .tokenizer import SylBoostTokenizer
from .units import KMeans, Units, deduplicate, pool_segments, ward_merge

__version__ = "0.1.0"

__all__ = [
    "RATE_PRESETS",
    "BertAdam",
    "KMeans",
    "LossPredConfig",
    "MaskedPredictionTeacher",
    "SegmentConfig",
    "SylBoostConfig",
    "SylBoostTokenizer",
    "SylBoostTrainer",
    "UnitConfig",
    "Units",
    "__version__",
    "backtrack",
    "bitrate",
    "boundary_scores",
    "calibrate_delta",
    "clustering_scores",
    "deduplicate",
    "loss_matrix",
    "loss_to_affinity",
    "losspred_segment",
    "mask_schedule",
    "mincut_segment",
    "ncut_costs",
    "optimal_segmentation",
    "pool_segments",
    "r_value",
    "segment_targets",
    "select_num_segments",
    "sse_costs",
    "sylboost_loss",
    "sylboost_segment",
    "tune_shift",
    "ward_merge",
]
