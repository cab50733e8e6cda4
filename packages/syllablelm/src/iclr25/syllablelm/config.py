"""Configuration dataclasses. Every default is the paper's / official code's value, with its source.

Sources: ``AlanBaade/SyllableLM`` (``extract_units.py``; ``syllablelm/SegmentalSSE/scripts/training_crf.sh`` and
``models/segmenter.py``; ``syllablelm/Experiments.ipynb``; ``syllablelm/fairseq/models/cluster/config/cluster_alan.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass

FRAME_RATE = 50.0  # HuBERT / data2vec2 frame rate at 16 kHz (320-sample hop)
SAMPLE_RATE = 16000  # official models take 16 kHz waveforms (extract_units.py docstring)

# extract_units.py FULL_MODELS_DICT: per-rate delta and quantile of the rate-control binary search.
RATE_PRESETS: dict[str, dict[str, float]] = {
    "8.33hz": {"delta": 0.0033, "quantile": 0.75},
    "6.25hz": {"delta": 0.0028, "quantile": 0.75},
    "5.0hz": {"delta": 0.0019, "quantile": 0.75},
}


def rate_preset(rate: str) -> dict[str, float]:
    """Look up a rate preset by name, accepting '6.25hz', '6.25Hz' or '6.25'."""
    if not isinstance(rate, str):
        raise TypeError(f"rate must be a string such as '6.25hz', got {type(rate).__name__}")
    key = rate.strip().lower()
    if not key.endswith("hz"):
        key += "hz"
    if key == "5hz":
        key = "5.0hz"
    if key not in RATE_PRESETS:
        raise ValueError(f"unknown rate {rate!r}: expected one of {sorted(RATE_PRESETS)}")
    return RATE_PRESETS[key]


@dataclass
class SegmentConfig:
    """SylBoost efficient extraction (extract_units.py: efficient_extraction_dp_helper / get_quantile_borders_helper)."""

    max_len: int = 35  # s=35 ("50 for librispeech, 35 for librilight"); the released extraction uses 35
    min_len: int = 3  # min_hop=3
    max_rate_hz: float = 10.0  # THRESHOLD = 1 / .10 / 50: at most 10 segments per second searched
    quantile: float = 0.75  # FULL_MODELS_DICT quantile
    frame_rate: float = FRAME_RATE


@dataclass
class LossPredConfig:
    """LossPred (Experiments.ipynb: fast_get_hubert_losses, min_cut_efficient)."""

    window: int = 51  # ssl=25 + ssr=26 masked frames per window
    gap: int = 150  # gap_size=150: windows 150 frames apart share one forward pass
    batch_size: int = 32  # masked passes per teacher batch
    clip: float = 100.0  # exp(-100) outside the band ("max_clip")
    sec_per_syllable: float = 0.16  # 6.25 Hz target rate of the min-cut
    min_len: int = 1  # min_hop=1
    max_len: int = 49  # max_hop=50 (exclusive) -> segments of 1..49 frames
    eps: float = 1e-5  # ncut denominator epsilon
    logit_temp: float = 0.1  # fairseq HuBERT default logit_temp (assumed; the notebook reads model.logit_temp)


@dataclass
class SylBoostConfig:
    """SylBoost distillation (SegmentalSSE/scripts/training_crf.sh, models/segmenter.py:Segmenter2)."""

    lr: float = 5e-5  # --lr 5e-5 (BertAdam)
    warmup: float = 0.1  # --warmup_fraction 0.1
    clip: float = 1.0  # --grad_clip 1.0
    weight_decay: float = 0.01  # BertAdam default weight decay
    batch_size: int = 32  # --batch_size 32
    epochs: int = 3  # "pretrain" phase: 3 epochs
    inner_lo: float = 0.33  # inner third: frames [b + int(0.33 L), e - int((1 - 0.67) L))
    inner_hi: float = 0.67
    max_seconds: float = 8.0  # audio cropped to the first 8 s
    freeze_cnn: bool = True  # feature_grad_mult 0


@dataclass
class UnitConfig:
    """Units (extract_units.py: SylBoostFeatureReader.forward; LM data dir LibriSpeech_bulk_2116_24576_agg_8192)."""

    n_kmeans: int = 24576  # k-means clusters before merging
    n_units: int = 8192  # Ward-merged vocabulary of the released 6.25 Hz model
    trim: int = 1  # pool over [start + 1, end - 1)
    standardize: bool = True  # per-vector (x - mean) / std over channels
