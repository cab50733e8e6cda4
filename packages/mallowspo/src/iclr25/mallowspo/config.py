"""Configuration dataclasses. Every default is the official value, with its source in a comment.

Sources: ``haoxian-chen/MallowsPO`` ``mallowsPO_config.py`` (the paper's official code, "official config"), and the
Llama-3-8B-Instruct launch commands in ``CapitalOne-Research/RainbowPO``
``commands_training_ultrafeedback_RainbowPO_final_run.ipynb`` ("official recipe").
"""

from __future__ import annotations

import dataclasses
import json
import math
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
    autocast_dtype: str | None = None  # "bfloat16": forwards under torch.autocast (official recipe trains in bf16)
    output_dir: str | None = None  # where checkpoints go; None disables checkpointing
    save_steps: int = 0  # checkpoint every N optimiser steps (0: only at the end when output_dir is set)
    log_every: int = 10
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Validate every field at construction: a bad value raises ``ValueError``/``TypeError`` naming the field
        and what was expected (nothing is clipped or silently ignored later)."""

        def number(name, lo=None, hi=None, lo_open=False, hi_open=False, allow_none=False, integer=False):
            v = getattr(self, name)
            if v is None and allow_none:
                return
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not float(v).is_integer()):
                kind = "an integer" if integer else "a number"
                raise TypeError(f"MallowsPOConfig.{name} must be {kind}, got {v!r}")
            if not math.isfinite(v):
                raise ValueError(f"MallowsPOConfig.{name} must be finite, got {v!r}")
            too_low = lo is not None and (v <= lo if lo_open else v < lo)
            too_high = hi is not None and (v >= hi if hi_open else v > hi)
            if too_low or too_high:
                lb = "" if lo is None else ("(" if lo_open else "[") + f"{lo}"
                ub = "" if hi is None else f"{hi}" + (")" if hi_open else "]")
                raise ValueError(f"MallowsPOConfig.{name} must lie in {lb or '(-inf'}, {ub or 'inf)'}; got {v!r}")
            if integer:
                setattr(self, name, int(v))

        def choice(name, options):
            if getattr(self, name) not in options:
                raise ValueError(f"MallowsPOConfig.{name} must be one of {options}, got {getattr(self, name)!r}")

        choice("loss_type", LOSS_TYPES)
        choice("entropy_mode", ("mean", "sum"))
        choice("ipo_convention", ("official", "rainbow"))
        choice("backend", ("auto", "torch", "triton"))
        choice("autocast_dtype", (None, "bfloat16"))
        for name in ("reference_free", "length_normalization", "precompute_ref"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"MallowsPOConfig.{name} must be a bool, got {getattr(self, name)!r}")
        number("beta", lo=0, lo_open=True)
        number("label_smoothing", lo=0, hi=0.5, hi_open=True)
        number("home_advantage")
        number("mixing_alpha", lo=0, hi=1, allow_none=True)
        number("sft_coef", lo=0)
        number("phi_star", lo=0, lo_open=True)
        number("dispersion_eps", lo=0, hi=1, lo_open=True, hi_open=True)
        number("vocab_size", lo=2, allow_none=True, integer=True)
        number("fixed_neg_log_dispersion", lo=0, allow_none=True)
        number("learning_rate", lo=0, lo_open=True)
        for name in ("per_device_batch_size", "gradient_accumulation_steps", "num_epochs", "max_length"):
            number(name, lo=1, integer=True)
        number("max_prompt_length", lo=0, integer=True)
        number("warmup_ratio", lo=0, hi=1, hi_open=True)
        number("weight_decay", lo=0)
        number("max_grad_norm", lo=0)
        number("seed", lo=0, integer=True)
        number("ref_chunk_rows", lo=1, integer=True)
        number("save_steps", lo=0, integer=True)
        number("log_every", lo=1, integer=True)
        if self.max_prompt_length >= self.max_length:
            raise ValueError(
                f"max_prompt_length ({self.max_prompt_length}) must be < max_length ({self.max_length}), "
                "or no completion token fits"
            )
        if self.output_dir is not None and not isinstance(self.output_dir, str):
            self.output_dir = str(self.output_dir)
        if not isinstance(self.extra, dict):
            raise TypeError(f"MallowsPOConfig.extra must be a dict, got {type(self.extra).__name__}")
        # options that a loss type does not use are refused rather than silently ignored
        if self.loss_type in ("mallows_ipo", "mallows_phi") and self.label_smoothing:
            raise ValueError(f"label_smoothing is only used by 'sigmoid'/'mallows_dpo', not {self.loss_type!r}")
        if self.loss_type == "mallows_phi" and self.mixing_alpha is not None:
            raise ValueError("mixing_alpha is not defined for loss_type='mallows_phi'")
        if self.loss_type == "sigmoid" and self.fixed_neg_log_dispersion is not None:
            raise ValueError("fixed_neg_log_dispersion has no effect with loss_type='sigmoid' (plain DPO, scale 1)")

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
