"""MallowsPOTrainer: a small, dependency-light preference-optimisation loop for any transformers causal LM.

One optimiser step = ``gradient_accumulation_steps`` micro-batches of ``per_device_batch_size`` pairs. Each
micro-batch runs the policy on [chosen; rejected] and, unless precomputed, the frozen reference model under
``torch.no_grad`` for its log-probs and its full-vocabulary entropy (the dispersion estimator). Checkpoints hold the
model, optimiser, scheduler and step, are written atomically, and ``train`` resumes from the newest one in
``output_dir``.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from pathlib import Path

import torch

from iclr25.shared import atomic_write, progress

from .config import MallowsPOConfig
from .data.preference import REF_KEYS, collate_preference
from .dispersion import neg_log_dispersion
from .logps import completion_labels, sequence_logps
from .losses import mallows_ipo_loss, mallows_phi_loss, mallows_theta_loss
from .reference_pass import reference_sequence_stats

__all__ = ["MallowsPOTrainer"]


def _is_peft_model(model) -> bool:
    """A ``peft.PeftModel`` (duck-typed, so peft is never imported here)."""
    return callable(getattr(model, "disable_adapter", None)) and callable(getattr(model, "get_base_model", None))


CHECKPOINT_NAME = "checkpoint.pt"


class MallowsPOTrainer:
    """Train ``model`` with the MallowsPO (or DPO) loss against a frozen ``ref_model``.

    Args:
        model: a causal LM returning ``.logits`` [B, T, V] (e.g. any ``transformers`` ``*ForCausalLM``).
        ref_model: the frozen reference model; may be ``None`` when every example carries precomputed reference
            fields (see :meth:`precompute_reference`) or when the dispersion is fixed and ``reference_free``.
            With a PEFT-wrapped policy (``peft.PeftModel``, e.g. LoRA) and ``ref_model=None``, the reference is the
            policy's base model with its adapters disabled (``model.disable_adapter()``, in eval mode): no second
            copy of the weights, and only the adapters train.
        config: :class:`MallowsPOConfig` (official defaults).
        pad_token_id: the id used to right-pad batches (default: ``model.config.pad_token_id`` or 0).
    """

    def __init__(self, model, ref_model, config: MallowsPOConfig | None = None, pad_token_id: int | None = None):
        if ref_model is not None and ref_model is model:
            raise ValueError("model and ref_model must be different objects (copy the model for the reference)")
        self.model = model
        self.ref_model = ref_model
        self.config = config or MallowsPOConfig()
        if not isinstance(self.config, MallowsPOConfig):
            raise TypeError(f"config must be a MallowsPOConfig, got {type(self.config).__name__}")
        if pad_token_id is None:
            pad_token_id = getattr(getattr(model, "config", None), "pad_token_id", None)
        self.pad_token_id = 0 if pad_token_id is None else int(pad_token_id)
        if ref_model is not None:
            ref_model.eval()  # used only under torch.no_grad; its requires_grad flags are left untouched
        # PEFT policy without a separate reference: the reference is the base model with the adapters disabled
        self.adapter_reference = ref_model is None and _is_peft_model(model)
        self.step = 0
        self.history: list[dict] = []
        self.optimizer = None
        self.scheduler = None

    # ------------------------------------------------------------------------------------------------------------
    # loss
    # ------------------------------------------------------------------------------------------------------------
    @property
    def _needs_entropy(self) -> bool:
        cfg = self.config
        return cfg.loss_type != "sigmoid" and cfg.fixed_neg_log_dispersion is None

    @property
    def _needs_ref_logps(self) -> bool:
        return not self.config.reference_free

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _autocast(self, device: torch.device):
        """bf16 autocast for the forwards when ``config.autocast_dtype`` is set (log-probs, entropies and the loss
        are still reduced in float32: the kernels upcast the logits)."""
        if self.config.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=getattr(torch, self.config.autocast_dtype))

    @torch.no_grad()
    def reference_stats(self, batch: dict) -> dict:
        """Reference log-probs and normalised entropies for a collated batch: each [B] (or None when unused)."""
        out = {k: batch[k] for k in REF_KEYS if k in batch}
        have_logps = "ref_chosen_logps" in out and "ref_rejected_logps" in out
        have_ent = "ref_chosen_entropy" in out and "ref_rejected_entropy" in out
        if (have_logps or not self._needs_ref_logps) and (have_ent or not self._needs_entropy):
            return out
        if self.ref_model is None and not self.adapter_reference:
            raise ValueError(
                "no ref_model and the batch lacks precomputed reference fields "
                f"{REF_KEYS}; pass a ref_model (or a PEFT-wrapped policy) or call precompute_reference first"
            )
        logps, ent = self._reference_sequences(batch)
        out["ref_chosen_logps"], out["ref_rejected_logps"] = logps.chunk(2)
        out["ref_chosen_entropy"], out["ref_rejected_entropy"] = ent.chunk(2)
        return out

    @torch.no_grad()
    def _reference_sequences(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference per-sequence log-probs (summed or length-normalised) and normalised entropies, [2B] each.

        The LM head runs on ``ref_chunk_rows`` completion positions at a time (no [2B, T, V] logits) for models
        whose logits are a plain linear head; others use the ordinary forward (see ``reference_pass``).
        """
        cfg = self.config
        if cfg.entropy_mode == "sum":
            warnings.warn(
                "entropy_mode='sum' is the paper's literal form; the scale can turn negative for long responses",
                UserWarning,
                stacklevel=3,
            )
        with self._autocast(batch["input_ids"].device), self._reference_model() as ref_model:
            return self._reference_sequences_inner(batch, ref_model)

    @contextlib.contextmanager
    def _reference_model(self):
        """The module that computes the reference: ``ref_model``, or the PEFT policy's unwrapped base model with
        its adapters disabled and dropout off (the policy's train/eval mode is restored afterwards)."""
        if not self.adapter_reference:
            yield self.ref_model
            return
        was_training = self.model.training
        self.model.eval()
        try:
            with self.model.disable_adapter():
                yield self.model.get_base_model()
        finally:
            self.model.train(was_training)

    def _reference_sequences_inner(self, batch: dict, ref_model) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        return reference_sequence_stats(
            ref_model,
            batch,
            length_normalization=cfg.length_normalization,
            entropy_mode=cfg.entropy_mode,
            vocab_size=cfg.vocab_size,
            chunk_rows=cfg.ref_chunk_rows,
            backend=cfg.backend,
        )

    def scale_for(self, ref: dict) -> torch.Tensor | float:
        """The dispersion scale c(x) = -log phi(x) for the batch (1.0 for plain DPO)."""
        cfg = self.config
        if cfg.loss_type == "sigmoid":
            return 1.0
        if cfg.fixed_neg_log_dispersion is not None:
            return float(cfg.fixed_neg_log_dispersion)
        return neg_log_dispersion(
            ref["ref_chosen_entropy"], ref["ref_rejected_entropy"], phi_star=cfg.phi_star, eps=cfg.dispersion_eps
        )

    def compute_loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """Loss (mean over pairs) and detached metrics for a collated batch (see ``collate_preference``)."""
        cfg = self.config
        device = self._device()
        batch = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}
        labels = completion_labels(batch["input_ids"], batch["completion_mask"])
        with self._autocast(device):
            logits = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        logps = sequence_logps(logits, labels, length_normalize=cfg.length_normalization, backend=cfg.backend)
        pc, pr = logps.chunk(2)
        ref = self.reference_stats(batch)
        rc, rr = ref.get("ref_chosen_logps"), ref.get("ref_rejected_logps")
        if "neg_log_dispersion" in batch and cfg.loss_type != "sigmoid" and cfg.fixed_neg_log_dispersion is None:
            c = batch["neg_log_dispersion"]
        else:
            c = self.scale_for(ref)
        common = dict(
            beta=cfg.beta,
            home_advantage=cfg.home_advantage,
            reference_free=cfg.reference_free,
            reduction="none",
        )
        if cfg.loss_type in ("sigmoid", "mallows_dpo"):
            loss = mallows_theta_loss(
                pc, pr, rc, rr, c, label_smoothing=cfg.label_smoothing, mixing_alpha=cfg.mixing_alpha, **common
            )
        elif cfg.loss_type == "mallows_ipo":
            loss = mallows_ipo_loss(
                pc, pr, rc, rr, c, convention=cfg.ipo_convention, mixing_alpha=cfg.mixing_alpha, **common
            )
        else:
            phi = torch.exp(-torch.as_tensor(c, dtype=torch.float32, device=device))
            loss = mallows_phi_loss(pc, pr, rc, rr, phi, **common)
        if cfg.sft_coef:
            loss = loss - cfg.sft_coef * pc  # official add_sft_loss: an SFT term on the chosen completion
        with torch.no_grad():
            zero = torch.zeros_like(pc)
            rew_c = cfg.beta * (pc - (zero if rc is None else rc))
            rew_r = cfg.beta * (pr - (zero if rr is None else rr))
            metrics = {
                "loss": float(loss.mean()),
                "rewards/chosen": float(rew_c.mean()),
                "rewards/rejected": float(rew_r.mean()),
                "rewards/margins": float((rew_c - rew_r).mean()),
                "rewards/accuracies": float((rew_c > rew_r).float().mean()),
                "logps/chosen": float(pc.mean()),
                "logps/rejected": float(pr.mean()),
                "neg_log_dispersion": float(torch.as_tensor(c, dtype=torch.float32).mean()),
            }
        return loss.mean(), metrics

    # ------------------------------------------------------------------------------------------------------------
    # precompute
    # ------------------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def precompute_reference(self, examples: list[dict], batch_size: int = 16) -> list[dict]:
        """Return copies of tokenised examples with reference log-probs and entropies added (``REF_KEYS``), so
        training no longer needs the reference model (set ``ref_model=None`` afterwards to free it)."""
        if self.ref_model is None and not self.adapter_reference:
            raise ValueError("precompute_reference needs a ref_model (or a PEFT-wrapped policy)")
        device = next((self.model if self.ref_model is None else self.ref_model).parameters()).device
        out = []
        for start in progress(range(0, len(examples), batch_size), desc="reference", leave=False):
            chunk = examples[start : start + batch_size]
            batch = collate_preference(
                [{k: ex[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")} for ex in chunk], self.pad_token_id
            )
            batch = {k: v.to(device) for k, v in batch.items()}
            logps, ent = self._reference_sequences(batch)
            lc, lr = logps.chunk(2)
            hc, hr = ent.chunk(2)
            for i, ex in enumerate(chunk):
                out.append(
                    {
                        **ex,
                        "ref_chosen_logps": float(lc[i]),
                        "ref_rejected_logps": float(lr[i]),
                        "ref_chosen_entropy": float(hc[i]),
                        "ref_rejected_entropy": float(hr[i]),
                    }
                )
        return out

    # ------------------------------------------------------------------------------------------------------------
    # training loop
    # ------------------------------------------------------------------------------------------------------------
    def _build_optim(self, total_steps: int) -> None:
        cfg = self.config
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the policy model has no parameter with requires_grad=True")
        self.optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
        warmup = int(math.ceil(cfg.warmup_ratio * total_steps))

        def lr_lambda(step: int) -> float:  # linear warmup, then linear decay to 0 (transformers "linear")
            if step < warmup:
                return (step + 1) / max(1, warmup)
            return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda)

    def _order(self, n: int, epoch: int) -> list[int]:
        gen = torch.Generator().manual_seed(self.config.seed + epoch)
        return torch.randperm(n, generator=gen).tolist()

    def train(
        self, examples: list[dict], max_steps: int | None = None, resume: bool = True, stop_at: int | None = None
    ) -> list[dict]:
        """Run the optimisation; returns one metrics dict per optimiser step (also kept in ``self.history``).

        ``max_steps`` overrides the schedule length (default: epochs x steps per epoch). ``stop_at`` ends the run
        early after that many steps with a checkpoint, keeping the schedule (a later ``train`` call resumes it).
        """
        cfg = self.config
        if not examples:
            raise ValueError("train needs at least one tokenised example")
        if not all(k in examples[0] for k in ("prompt_ids", "chosen_ids", "rejected_ids")):
            raise ValueError(
                "train needs tokenised examples with prompt_ids/chosen_ids/rejected_ids; pass text or "
                "conversational rows through iclr25.mallowspo.data.tokenize_preference(rows, tokenizer) first"
            )
        if cfg.precompute_ref and not all(k in examples[0] for k in REF_KEYS):
            examples = self.precompute_reference(examples)
        micro = cfg.per_device_batch_size
        per_step = micro * cfg.gradient_accumulation_steps
        steps_per_epoch = max(1, len(examples) // per_step)
        total = steps_per_epoch * cfg.num_epochs if max_steps is None else int(max_steps)
        self._build_optim(total)
        ckpt = Path(cfg.output_dir) / CHECKPOINT_NAME if cfg.output_dir else None
        if resume and ckpt is not None and ckpt.is_file():
            self.load_checkpoint(ckpt)
        self.model.train()
        end = total if stop_at is None else min(total, int(stop_at))
        bar = progress(range(self.step, end), desc="mallowspo", leave=False)
        for step in bar:
            epoch, within = divmod(step, steps_per_epoch)
            order = self._order(len(examples), epoch)
            idx = order[within * per_step : (within + 1) * per_step]
            if len(idx) < per_step:  # fewer examples than one step: sample with wrap-around
                idx = [order[i % len(order)] for i in range(within * per_step, (within + 1) * per_step)]
            self.optimizer.zero_grad(set_to_none=True)
            agg: dict[str, float] = {}
            for a in range(cfg.gradient_accumulation_steps):
                chunk = [examples[i] for i in idx[a * micro : (a + 1) * micro]]
                loss, metrics = self.compute_loss(collate_preference(chunk, self.pad_token_id))
                (loss / cfg.gradient_accumulation_steps).backward()
                for k, v in metrics.items():
                    agg[k] = agg.get(k, 0.0) + v / cfg.gradient_accumulation_steps
            if cfg.max_grad_norm and cfg.max_grad_norm > 0:
                agg["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm))
            self.optimizer.step()
            self.scheduler.step()
            self.step = step + 1
            agg["step"] = self.step
            agg["lr"] = self.scheduler.get_last_lr()[0]
            self.history.append(agg)
            if ckpt is not None and cfg.save_steps and self.step % cfg.save_steps == 0:
                self.save_checkpoint(ckpt)
        if ckpt is not None:
            self.save_checkpoint(ckpt)
        self.model.eval()
        return self.history

    # ------------------------------------------------------------------------------------------------------------
    # checkpoints
    # ------------------------------------------------------------------------------------------------------------
    def save_checkpoint(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "format": "iclr25-mallowspo-checkpoint-v1",
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "config": self.config.to_dict(),
            "history": self.history,
        }
        with atomic_write(path, mode="wb") as f:
            torch.save(state, f)
        return path

    def load_checkpoint(self, path: str | Path) -> None:
        state = torch.load(Path(path), map_location=self._device(), weights_only=False)
        if not isinstance(state, dict) or state.get("format") != "iclr25-mallowspo-checkpoint-v1":
            raise ValueError(f"{path} is not a MallowsPOTrainer checkpoint")
        self.model.load_state_dict(state["model"])
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])
        self.history = list(state.get("history", []))
