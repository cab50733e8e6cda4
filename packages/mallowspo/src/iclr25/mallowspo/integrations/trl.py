"""MallowsPO as a drop-in for TRL's ``DPOTrainer`` (tested with trl 1.x; install with ``pip install
iclr25-mallowspo[trl]``).

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
import math
from dataclasses import dataclass, field

import torch

try:
    from accelerate.utils import is_peft_model
    from trl import DPOConfig, DPOTrainer
    from trl.models.utils import disable_gradient_checkpointing
    from trl.trainer.utils import use_adapter
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "iclr25.mallowspo.integrations.trl needs TRL: pip install 'iclr25-mallowspo[trl]' (trl>=1.0,<2)"
    ) from e

from ..dispersion import PHI_STAR, neg_log_dispersion
from ..kernels import logp_entropy
from ..losses import mallows_ipo_loss, mallows_phi_loss, mallows_theta_loss

__all__ = ["MallowsDPOConfig", "MallowsDPOTrainer"]

MALLOWS_LOSS_TYPES = ("mallows_dpo", "mallows_ipo", "mallows_phi")


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


def ref_tok_entropy_vocab(trainer) -> int:
    """V for the ln V normalisation: the reference LM head's output size (as the official ``logits.shape[-1]``)."""
    model = trainer.ref_model if trainer.ref_model is not None else trainer.model
    return int(trainer.accelerator.unwrap_model(model).get_output_embeddings().weight.shape[0])


class MallowsDPOTrainer(DPOTrainer):
    """``trl.DPOTrainer`` with the MallowsPO loss (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        args_obj = kwargs.get("args")
        if args_obj is None and len(args) > 2:
            args_obj = args[2]
        if not isinstance(args_obj, MallowsDPOConfig):
            raise TypeError("MallowsDPOTrainer needs args=MallowsDPOConfig(...)")
        if args_obj.precompute_ref_log_probs and args_obj.fixed_neg_log_dispersion is None:
            raise ValueError(
                "precompute_ref_log_probs=True stores only reference log-probs, but the MallowsPO dispersion needs "
                "the reference entropy: use precompute_ref_log_probs=False or set fixed_neg_log_dispersion "
                "(or use iclr25.mallowspo.MallowsPOTrainer(precompute_ref=True), which stores both)"
            )
        super().__init__(*args, **kwargs)

    def _reference_forward(self, model_kwargs, labels) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token reference log-probs and entropies [2B, T-1] (0 off the completion), without gradient."""
        ref_kwargs = {k: v for k, v in model_kwargs.items() if k != "output_router_logits"}
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            if is_peft_model(self.model) and self.ref_model is None:
                unwrapped = self.accelerator.unwrap_model(self.model)
                ctx = use_adapter(unwrapped, adapter_name="ref" if "ref" in unwrapped.peft_config else None)
            else:
                ctx = contextlib.nullcontext()
            with ctx:
                model = self.model if self.ref_model is None else self.ref_model
                logits = model(**ref_kwargs).logits
            shift_logits, shift_labels = logits[:, :-1], labels[:, 1:]
            return logp_entropy(shift_logits, shift_labels, backend=self.args.mallows_backend)

    def _compute_loss(self, model, inputs, return_outputs):
        args = self.args
        mode = "train" if self.model.training else "eval"
        non_model = {"completion_mask", "ref_chosen_logps", "ref_rejected_logps"}
        model_kwargs = {k: v for k, v in inputs.items() if k not in non_model}
        model_kwargs["use_cache"] = False
        completion_mask = inputs["completion_mask"]
        mask = completion_mask[..., 1:]
        seq_len = mask.size(1)
        labels = inputs["input_ids"].masked_fill(completion_mask == 0, -100)
        outputs = model(**model_kwargs, labels=labels, fused_lm_head=True)
        n_tokens = mask.sum(dim=1).clamp(min=1)
        logps = outputs.log_probs[:, -seq_len:].sum(dim=1)
        if args.length_normalization:
            logps = logps / n_tokens
        chosen_logps, rejected_logps = logps.chunk(2, dim=0)

        need_entropy = args.fixed_neg_log_dispersion is None
        if self.precompute_ref_logps:
            ref_chosen, ref_rejected = inputs["ref_chosen_logps"], inputs["ref_rejected_logps"]
            scale = float(args.fixed_neg_log_dispersion)
        else:
            ref_tok_logps, ref_tok_entropy = self._reference_forward(model_kwargs, labels)
            ref_logps = ref_tok_logps[:, -seq_len:].sum(dim=1)
            if args.length_normalization:
                ref_logps = ref_logps / n_tokens
            ref_chosen, ref_rejected = ref_logps.chunk(2, dim=0)
            if need_entropy:
                ent = (ref_tok_entropy[:, -seq_len:] * mask).sum(dim=1) / math.log(ref_tok_entropy_vocab(self))
                if args.entropy_mode == "mean":
                    ent = ent / n_tokens
                h_chosen, h_rejected = ent.chunk(2, dim=0)
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
