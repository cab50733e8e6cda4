"""MallowsPO as a drop-in for TRL's ``DPOTrainer`` (tested with trl 1.15.0 and 1.16.0, the ends of the pinned range
``trl>=1.15,<1.17``; install with ``pip install iclr25-mallowspo[trl]``).

Strict: every ``DPOConfig`` option that this subclass does not implement with the Mallows losses (a ``loss_type``
other than the default, ``loss_weights``, ``use_weighting``, ``ld_alpha``, a non-default ``f_divergence_type``,
``discopop_tau``, ``sync_ref_model``, an MoE router auxiliary loss) is refused with a ``ValueError`` instead of being
ignored. ``precompute_ref_log_probs=True`` precomputes the reference log-probs *and* the normalised reference
entropies (dataset columns ``ref_chosen_entropy`` / ``ref_rejected_entropy``), so the reference model is not needed
during training. V for the ln V normalisation is the width of the reference logits (as the official
``logits.shape[-1]``), never a weight shape (ZeRO-3 shards weights).

``MallowsDPOTrainer`` keeps everything of ``trl.DPOTrainer`` (data preparation, collator, accelerate, PEFT,
logging) and replaces the loss computation: the policy log-probs come from TRL's fused LM head as usual; the frozen
reference model returns its logits once (no gradient) and this package's kernel computes the label log-probs and the
full-vocabulary entropy from them in one streaming pass (Triton on CUDA), giving the dispersion scale
c(x) = -phi_star * log(H̄); then the MallowsPO loss of this package is applied.

Why not TRL's fused LM head for the reference: TRL patches it for log-probs only and accelerate then wraps that
forward (autocast / output conversion). Re-patching it to also return the entropy bypasses accelerate's wrapper; in
our tests its log-probs then differed from TRL's own reference log-probs by ~4e-3 nats per sequence. Going through
the wrapped forward keeps the reference log-probs bit-identical to TRL's (tested).

Usage::

    from iclr25.mallowspo.integrations.trl import MallowsDPOConfig, MallowsDPOTrainer
    args = MallowsDPOConfig(output_dir="out", beta=0.1, mallows_loss_type="mallows_dpo")
    trainer = MallowsDPOTrainer(model=model, ref_model=ref_model, args=args, train_dataset=ds,
                                processing_class=tokenizer)
    trainer.train()
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass, field

import torch

try:
    import trl
    from accelerate.utils import is_peft_model
    from trl import DPOConfig, DPOTrainer
    from trl.models.utils import disable_gradient_checkpointing
    from trl.trainer.utils import use_adapter
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "iclr25.mallowspo.integrations.trl needs TRL: pip install 'iclr25-mallowspo[trl]' (trl>=1.15,<1.17)"
    ) from e

from ..dispersion import PHI_STAR, neg_log_dispersion, normalised_sequence_entropy
from ..kernels import logp_entropy
from ..losses import mallows_ipo_loss, mallows_phi_loss, mallows_theta_loss

__all__ = ["TESTED_TRL", "MallowsDPOConfig", "MallowsDPOTrainer"]

MALLOWS_LOSS_TYPES = ("mallows_dpo", "mallows_ipo", "mallows_phi")
TESTED_TRL = ((1, 15), (1, 16))  # lowest and highest minor versions the test suite was run with
ENTROPY_KEYS = ("ref_chosen_entropy", "ref_rejected_entropy")
_NON_MODEL_KEYS = {"completion_mask", "ref_chosen_logps", "ref_rejected_logps", *ENTROPY_KEYS}


def _trl_version() -> tuple[int, int]:
    parts = trl.__version__.split(".")
    return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)


if _trl_version() < TESTED_TRL[0]:
    raise ImportError(
        f"iclr25.mallowspo.integrations.trl needs trl>=1.15,<1.17 (it uses DPOTrainer's fused LM head, added in "
        f"1.15); found trl {trl.__version__}: pip install 'trl>=1.15,<1.17'"
    )
if _trl_version() > TESTED_TRL[1]:
    warnings.warn(
        f"iclr25.mallowspo.integrations.trl was tested with trl 1.15 and 1.16 (pinned trl>=1.15,<1.17); found trl "
        f"{trl.__version__}, whose DPOTrainer internals may differ",
        UserWarning,
        stacklevel=2,
    )

# DPOConfig fields this subclass does not implement, with the only value it accepts (their TRL default).
_UNSUPPORTED_DEFAULTS = {
    "loss_weights": None,
    "use_weighting": False,
    "ld_alpha": None,
    "f_divergence_type": "reverse_kl",
    "f_alpha_divergence_coef": 0.5,
    "discopop_tau": 0.05,
    "sync_ref_model": False,
}


@dataclass
class MallowsDPOConfig(DPOConfig):
    """``trl.DPOConfig`` plus the MallowsPO options (defaults: official MallowsPO values where they exist).

    ``loss_type`` of TRL is ignored by :class:`MallowsDPOTrainer`; ``mallows_loss_type`` chooses the loss.
    """

    mallows_loss_type: str = field(
        default="mallows_dpo", metadata={"help": "mallows_dpo (θ scaling), mallows_ipo or mallows_phi"}
    )
    phi_star: float = field(default=PHI_STAR, metadata={"help": "official neg_log_dispersion_mean = 0.29"})
    entropy_mode: str = field(default="mean", metadata={"help": "mean (official code) or sum (paper formula)"})
    dispersion_eps: float = field(default=1e-6, metadata={"help": "clamp of the normalised entropy"})
    fixed_neg_log_dispersion: float | None = field(
        default=None, metadata={"help": "use this constant scale instead of the entropy estimator (1.0 = DPO)"}
    )
    home_advantage: float = field(default=0.0, metadata={"help": "official home_advantage (SimPO margin γ/β)"})
    length_normalization: bool = field(
        default=False, metadata={"help": "average log-probs over completion tokens (official MallowsPO: True)"}
    )
    mallows_reference_free: bool = field(default=False, metadata={"help": "drop the reference log-ratio term"})
    ipo_convention: str = field(default="official", metadata={"help": "official or rainbow"})
    mallows_backend: str = field(default="auto", metadata={"help": "kernel backend: auto, torch or triton"})

    def __post_init__(self):
        super().__post_init__()
        if self.mallows_loss_type not in MALLOWS_LOSS_TYPES:
            raise ValueError(f"mallows_loss_type must be one of {MALLOWS_LOSS_TYPES}, got {self.mallows_loss_type!r}")
        if self.entropy_mode not in ("mean", "sum"):
            raise ValueError(f"entropy_mode must be 'mean' or 'sum', got {self.entropy_mode!r}")
        if self.ipo_convention not in ("official", "rainbow"):
            raise ValueError(f"ipo_convention must be 'official' or 'rainbow', got {self.ipo_convention!r}")
        if self.mallows_backend not in ("auto", "torch", "triton"):
            raise ValueError(f"mallows_backend must be 'auto', 'torch' or 'triton', got {self.mallows_backend!r}")
        if not self.phi_star > 0:
            raise ValueError(f"phi_star must be > 0, got {self.phi_star}")
        if not 0 < self.dispersion_eps < 1:
            raise ValueError(f"dispersion_eps must lie in (0, 1), got {self.dispersion_eps}")
        c = self.fixed_neg_log_dispersion
        if c is not None and not (c >= 0 and c != float("inf")):
            raise ValueError(f"fixed_neg_log_dispersion must be finite and >= 0, got {c}")
        loss_type = self.loss_type if isinstance(self.loss_type, (list, tuple)) else [self.loss_type]
        if list(loss_type) != ["sigmoid"]:
            raise ValueError(
                f"MallowsDPOConfig does not use TRL's loss_type (got {self.loss_type!r}); leave it at its default "
                f"['sigmoid'] and choose the loss with mallows_loss_type, one of {MALLOWS_LOSS_TYPES}"
            )
        for name, default in _UNSUPPORTED_DEFAULTS.items():
            if hasattr(self, name) and getattr(self, name) != default:
                raise ValueError(
                    f"MallowsDPOTrainer does not implement DPOConfig.{name}={getattr(self, name)!r} with the MallowsPO "
                    f"losses; leave it at {default!r}"
                )
        if self.mallows_loss_type != "mallows_dpo" and self.label_smoothing:
            raise ValueError(
                f"label_smoothing is only used by mallows_loss_type='mallows_dpo', not {self.mallows_loss_type!r}"
            )
        if self.router_aux_loss_coef:
            raise ValueError(
                "MallowsDPOTrainer does not add the MoE router auxiliary loss; leave router_aux_loss_coef unset (None) "
                "and, for Mixture-of-Experts models, set it to 0.0"
            )


class _WithEntropyColumns:
    """Wraps TRL's collator so precomputed entropy columns reach ``_compute_loss`` as [B] tensors."""

    def __init__(self, base):
        self.base = base

    def __call__(self, examples):
        out = self.base(examples)
        for key in ENTROPY_KEYS:
            if key in examples[0]:
                out[key] = torch.tensor([float(ex[key]) for ex in examples], dtype=torch.float32)
        return out


class MallowsDPOTrainer(DPOTrainer):
    """``trl.DPOTrainer`` with the MallowsPO loss (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        args_obj = kwargs.get("args")
        if args_obj is None and len(args) > 2:
            args_obj = args[2]
        if not isinstance(args_obj, MallowsDPOConfig):
            raise TypeError("MallowsDPOTrainer needs args=MallowsDPOConfig(...)")
        super().__init__(*args, **kwargs)
        if self.aux_loss_enabled:
            raise ValueError(
                "this is a Mixture-of-Experts model with a router auxiliary loss, which MallowsDPOTrainer does not "
                "add; pass router_aux_loss_coef=0.0 to train without it"
            )
        self.data_collator = _WithEntropyColumns(self.data_collator)

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if self._signature_columns is not None:
            self._signature_columns = list(dict.fromkeys([*self._signature_columns, *ENTROPY_KEYS]))

    def _reference_forward(self, model_kwargs, labels, model=None) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Per-token reference log-probs and entropies [2B, T-1] (0 off the completion), without gradient, and V
        (the width of the reference logits)."""
        ref_kwargs = {k: v for k, v in model_kwargs.items() if k != "output_router_logits"}
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            if self.ref_model is None and is_peft_model(self.model):  # the reference is the adapter-free model
                unwrapped = self.accelerator.unwrap_model(self.model)
                ctx = use_adapter(unwrapped, adapter_name="ref" if "ref" in unwrapped.peft_config else None)
            else:
                ctx = contextlib.nullcontext()
            with ctx:
                if model is None:
                    model = self.model if self.ref_model is None else self.ref_model
                logits = model(**ref_kwargs).logits
            shift_logits, shift_labels = logits[:, :-1], labels[:, 1:]
            logp, ent = logp_entropy(shift_logits, shift_labels, backend=self.args.mallows_backend)
            return logp, ent, int(logits.shape[-1])

    def _sequence_stats(self, inputs, model=None):
        """Reference per-sequence log-probs (summed or averaged as the policy's) and normalised entropies H̄, [2B]."""
        model_kwargs = {k: v for k, v in inputs.items() if k not in _NON_MODEL_KEYS}
        model_kwargs["use_cache"] = False
        completion_mask = inputs["completion_mask"]
        mask = completion_mask[..., 1:]
        seq_len = mask.size(1)
        labels = inputs["input_ids"].masked_fill(completion_mask == 0, -100)
        tok_logp, tok_ent, vocab = self._reference_forward(model_kwargs, labels, model)
        ref_logps = tok_logp[:, -seq_len:].sum(dim=1)
        if self.args.length_normalization:
            ref_logps = ref_logps / mask.sum(dim=1).clamp(min=1)
        ent = normalised_sequence_entropy(tok_ent[:, -seq_len:], mask.bool(), vocab, self.args.entropy_mode)
        return ref_logps, ent

    def _precompute_ref_logps(self, dataset, name: str, batch_size: int):
        """Reference log-probs *and* normalised entropies for every pair, added as dataset columns (TRL's own
        precompute stores only the log-probs, and ``_compute_loss`` below reads both)."""
        from datasets import IterableDataset
        from torch.utils.data import DataLoader
        from tqdm import tqdm

        if isinstance(dataset, IterableDataset):
            raise ValueError("precompute_ref_log_probs=True needs a map-style Dataset, not an IterableDataset")
        if self.ref_model is None and self.is_deepspeed_enabled:
            from trl.models.utils import prepare_deepspeed

            if getattr(self, "_precompute_engine", None) is None:
                self._precompute_engine = prepare_deepspeed(self.model, self.accelerator)
            model = self._precompute_engine
        else:
            model = self.ref_model or self.model
        loader = DataLoader(
            dataset,
            batch_size=batch_size,
            collate_fn=self.data_collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
            shuffle=False,
        )
        loader = self.accelerator.prepare(loader)
        cols = {k: [] for k in ("ref_chosen_logps", "ref_rejected_logps", *ENTROPY_KEYS)}
        for batch in tqdm(
            loader, desc=f"Reference log-probs and entropies ({name})", disable=bool(os.environ.get("TQDM_DISABLE", ""))
        ):
            logps, ent = self._sequence_stats(batch, model=model)
            parts = (*logps.chunk(2, dim=0), *ent.chunk(2, dim=0))
            parts = self.accelerator.gather_for_metrics(parts)
            for key, part in zip(cols, parts):
                cols[key].append(part.float().cpu())
        for key, parts in cols.items():
            values = torch.cat(parts)
            if values.numel() != len(dataset):
                raise RuntimeError(f"precompute produced {values.numel()} values of {key} for {len(dataset)} rows")
            if key in dataset.column_names:
                dataset = dataset.remove_columns(key)
            dataset = dataset.add_column(key, values.tolist())
        return dataset

    def _compute_loss(self, model, inputs, return_outputs):
        args = self.args
        mode = "train" if self.model.training else "eval"
        model_kwargs = {k: v for k, v in inputs.items() if k not in _NON_MODEL_KEYS}
        model_kwargs["use_cache"] = False
        completion_mask = inputs["completion_mask"]
        mask = completion_mask[..., 1:]
        seq_len = mask.size(1)
        n_tokens = mask.sum(dim=1)
        if bool((n_tokens == 0).any()):
            raise ValueError(
                f"rows {(n_tokens == 0).nonzero(as_tuple=True)[0][:8].tolist()} of the batch have no completion "
                "token (max_length too short for the prompt?)"
            )
        labels = inputs["input_ids"].masked_fill(completion_mask == 0, -100)
        outputs = model(**model_kwargs, labels=labels, fused_lm_head=True)
        logps = outputs.log_probs[:, -seq_len:].sum(dim=1)
        if args.length_normalization:
            logps = logps / n_tokens
        chosen_logps, rejected_logps = logps.chunk(2, dim=0)

        need_entropy = args.fixed_neg_log_dispersion is None
        if self.precompute_ref_logps:
            ref_chosen, ref_rejected = inputs["ref_chosen_logps"], inputs["ref_rejected_logps"]
            if need_entropy:
                if not all(k in inputs for k in ENTROPY_KEYS):
                    raise ValueError(f"precomputed batch lacks {ENTROPY_KEYS}; the dataset was not precomputed here")
                h_chosen, h_rejected = inputs["ref_chosen_entropy"], inputs["ref_rejected_entropy"]
        else:
            ref_logps, ent = self._sequence_stats(inputs)
            ref_chosen, ref_rejected = ref_logps.chunk(2, dim=0)
            h_chosen, h_rejected = ent.chunk(2, dim=0)
        if need_entropy:
            scale = neg_log_dispersion(h_chosen, h_rejected, phi_star=args.phi_star, eps=args.dispersion_eps)
        else:
            scale = float(args.fixed_neg_log_dispersion)

        common = dict(
            beta=self.beta,
            home_advantage=args.home_advantage,
            reference_free=args.mallows_reference_free,
            reduction="none",
        )
        if args.mallows_loss_type == "mallows_dpo":
            per_seq = mallows_theta_loss(
                chosen_logps,
                rejected_logps,
                ref_chosen,
                ref_rejected,
                scale,
                label_smoothing=self.label_smoothing,
                **common,
            )
        elif args.mallows_loss_type == "mallows_ipo":
            per_seq = mallows_ipo_loss(
                chosen_logps, rejected_logps, ref_chosen, ref_rejected, scale, convention=args.ipo_convention, **common
            )
        else:
            phi = torch.exp(-torch.as_tensor(scale, dtype=chosen_logps.dtype, device=chosen_logps.device))
            per_seq = mallows_phi_loss(chosen_logps, rejected_logps, ref_chosen, ref_rejected, phi, **common)
        loss = per_seq.mean()

        with torch.no_grad():
            chosen_rewards = self.beta * (chosen_logps - ref_chosen)
            rejected_rewards = self.beta * (rejected_logps - ref_rejected)
            gather = self.accelerator.gather_for_metrics
            m = self._metrics[mode]
            m["rewards/chosen"].append(gather(chosen_rewards).mean().item())
            m["rewards/rejected"].append(gather(rejected_rewards).mean().item())
            m["rewards/margins"].append(gather(chosen_rewards - rejected_rewards).mean().item())
            m["rewards/accuracies"].append(gather((chosen_rewards > rejected_rewards).float()).mean().item())
            m["logps/chosen"].append(gather(chosen_logps.detach()).mean().item())
            m["logps/rejected"].append(gather(rejected_logps.detach()).mean().item())
            scale_t = torch.as_tensor(scale, dtype=torch.float32, device=chosen_logps.device).reshape(-1)
            m["mallows/neg_log_dispersion"].append(gather(scale_t).mean().item())
        if return_outputs:
            with torch.no_grad():
                outputs = model(**model_kwargs)
            return loss, outputs
        return loss
