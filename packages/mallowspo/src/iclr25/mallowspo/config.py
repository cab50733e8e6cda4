"""Configuration dataclasses. Every default is the official value, with its source in a comment.

Sources: ``haoxian-chen/MallowsPO`` ``mallowsPO_config.py`` (the paper's official code, "official config"), and the
Llama-3-8B-Instruct launch commands in ``CapitalOne-Research/RainbowPO``
``commands_training_ultrafeedback_RainbowPO_final_run.ipynb`` ("official recipe").
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LOSS_TYPES", "MallowsPOConfig"]

LOSS_TYPES = ("sigmoid", "mallows_dpo", "mallows_ipo", "mallows_phi")


@dataclass
class MallowsPOConfig:
    """Hyper-parameters of :class:`iclr25.mallowspo.MallowsPOTrainer`."""

    # --- loss ---
    loss_type: str = "mallows_dpo"  # official config: loss_type="mallows_dpo" (θ-scaling); "sigmoid" is plain DPO
    beta: float = 10.0  # official config: beta=10 (the "Mallows + SimPO" plug-in setting)
    label_smoothing: float = 0.0  # official config: label_smoothing=0
    home_advantage: float = 0.0  # official config: home_advantage=0.0 (SimPO's γ/β margin)
    reference_free: bool = True  # official config: reference_free=True (the reference still gives the entropy)
    length_normalization: bool = True  # official config: length_normalization=True (SimPO average log-probs)
    mixing_alpha: float | None = None  # official config: if_mixing_alpha=False (mixing_alpha=0.5 when enabled)
    sft_coef: float = 0.0  # official: add_sft_loss=False; when enabled sft_coef=0.5 (loss -= sft_coef * logp_chosen)
    ipo_convention: str = "official"  # official code: (c Δ - 1/(2β))^2; "rainbow": (β c Δ - 1/2)^2
    # --- dispersion estimator ---
    phi_star: float = 0.29  # official config: neg_log_dispersion_mean=0.29
    entropy_mode: str = "mean"  # official code averages over completion tokens (paper's formula sums)
    dispersion_eps: float = 1e-6  # ours: clamp H̄ >= eps (the official code has no clamp)
    vocab_size: int | None = None  # ours: normalise by ln(vocab_size) instead of ln(logits.shape[-1]) if set
    fixed_neg_log_dispersion: float | None = None  # ours: a constant scale instead of the estimator (1.0 = DPO)
    # --- optimisation (official recipe) ---
    learning_rate: float = 1e-6  # official recipe: learning_rate=1e-6
    per_device_batch_size: int = 1  # official recipe: per_device_train_batch_size=1
    gradient_accumulation_steps: int = 32  # official recipe: gradient_accumulation_steps=32 (x 8 GPUs = 256)
    num_epochs: int = 1  # official recipe: num_train_epochs=1
    warmup_ratio: float = 0.1  # official recipe: warmup_ratio=0.1, linear schedule (TRL/transformers default)
    weight_decay: float = 0.0  # transformers TrainingArguments default (adamw_torch)
    max_grad_norm: float = 1.0  # transformers TrainingArguments default
    max_length: int = 2048  # official recipe: max_length=2048
    max_prompt_length: int = 1800  # official recipe: max_prompt_length=1800
    seed: int = 42  # official recipe: seed=42
    # --- engineering (ours) ---
    precompute_ref: bool = False  # precompute reference log-probs and entropies once (then ref_model may be None)
    ref_chunk_rows: int = 4096  # reference LM head applied to this many positions at a time (no [B, T, V] logits)
    backend: str = "auto"  # kernel backend: "auto" (Triton on CUDA), "torch", "triton"
    output_dir: str | None = None  # where checkpoints go; None disables checkpointing
    save_steps: int = 0  # checkpoint every N optimiser steps (0: only at the end when output_dir is set)
    log_every: int = 10
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        if not self.beta > 0:
            raise ValueError(f"beta must be > 0, got {self.beta}")
        if self.entropy_mode not in ("mean", "sum"):
            raise ValueError(f"entropy_mode must be 'mean' or 'sum', got {self.entropy_mode!r}")
        if self.sft_coef < 0:
            raise ValueError(f"sft_coef must be >= 0, got {self.sft_coef}")
        if self.ipo_convention not in ("official", "rainbow"):
            raise ValueError(f"ipo_convention must be 'official' or 'rainbow', got {self.ipo_convention!r}")
        for name in ("per_device_batch_size", "gradient_accumulation_steps", "num_epochs", "max_length"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must lie in [0, 1), got {self.warmup_ratio}")
        if self.max_prompt_length > self.max_length:
            raise ValueError("max_prompt_length must not exceed max_length")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> MallowsPOConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown MallowsPOConfig fields: {sorted(unknown)}; expected some of {sorted(names)}")
        return cls(**d)

    @classmethod
    def from_json(cls, path: str | Path) -> MallowsPOConfig:
        with open(path) as f:
            return cls.from_dict(json.load(f))
