"""SyllableLM (Baade, Peng, Harwath, ICLR 2025): syllable-like speech units and a unit language model.

Part 1 (units): LossPred boundaries from a masked-prediction teacher, SylBoost distillation and segmentation with the
official rate control, syllable units (pooling, k-means, Ward merge, deduplication), boundary/cluster metrics, and a
synthetic speech corpus with exact syllable times.

Part 2 (language model): the unit LM (``SyllableLM``) and its training loop, the interleaved vocoder-LM layout, and
loaders for the official LM checkpoints and unit tables and for real corpora (audio, TextGrids, LibriSpeech folders).
"""

from .config import RATE_PRESETS, LossPredConfig, SegmentConfig, SylBoostConfig, UnitConfig
from .data.loaders import iter_librispeech, load_audio, read_textgrid, write_textgrid
from .data.syllabify import syllabify, syllables_from_alignment, syllables_from_textgrid
from .interleaving import InterleavedVocab, Vocoder, dedup_with_durations, deinterleave, greedy_short_units, interleave
from .lm import SyllableLM, SyllableLMConfig
from .lm_train import LMTrainConfig, load_lm_checkpoint, pair_accuracy, train_lm
from .loaders import lm_state_to_fairseq, load_fairseq_lm
from .losspred import MaskedPredictionTeacher, loss_matrix, loss_to_affinity, losspred_segment, mask_schedule
from .metrics import BOUNDARY_PROTOCOLS, bitrate, boundary_scores, clustering_scores, r_value, tune_shift
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
from .tokenizer import SylBoostTokenizer, load_official_units
from .units import KMeans, Units, deduplicate, pool_segments, ward_merge

__version__ = "0.1.0"

__all__ = [
    "BOUNDARY_PROTOCOLS",
    "RATE_PRESETS",
    "BertAdam",
    "InterleavedVocab",
    "KMeans",
    "LMTrainConfig",
    "LossPredConfig",
    "MaskedPredictionTeacher",
    "SegmentConfig",
    "SylBoostConfig",
    "SylBoostTokenizer",
    "SylBoostTrainer",
    "SyllableLM",
    "SyllableLMConfig",
    "UnitConfig",
    "Units",
    "Vocoder",
    "__version__",
    "backtrack",
    "bitrate",
    "boundary_scores",
    "calibrate_delta",
    "clustering_scores",
    "dedup_with_durations",
    "deduplicate",
    "deinterleave",
    "greedy_short_units",
    "interleave",
    "iter_librispeech",
    "lm_state_to_fairseq",
    "load_audio",
    "load_fairseq_lm",
    "load_lm_checkpoint",
    "load_official_units",
    "loss_matrix",
    "loss_to_affinity",
    "losspred_segment",
    "mask_schedule",
    "mincut_segment",
    "ncut_costs",
    "optimal_segmentation",
    "pair_accuracy",
    "pool_segments",
    "r_value",
    "read_textgrid",
    "segment_targets",
    "select_num_segments",
    "sse_costs",
    "sylboost_loss",
    "syllabify",
    "syllables_from_alignment",
    "syllables_from_textgrid",
    "sylboost_segment",
    "train_lm",
    "tune_shift",
    "ward_merge",
    "write_textgrid",
]
