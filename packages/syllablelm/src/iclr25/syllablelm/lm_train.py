"""Unit-LM training: official optimizer (Adam b=(0.9, 0.98), eps 1e-6, weight decay 0.01, lr 2e-4) and the
tri-stage schedule, scaled down for CPU, with atomic checkpoints and resume."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from iclr25.shared import atomic_write, progress

from .lm import SyllableLM, SyllableLMConfig, tri_stage_lr

__all__ = ["LMTrainConfig", "load_lm_checkpoint", "pair_accuracy", "train_lm"]


@dataclass
class LMTrainConfig:
    steps: int = 400_000  # official max_update
    lr: float = 2e-4
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    weight_decay: float = 0.01
    warmup: float = 0.04  # 16k of 400k
    hold: float = 0.21  # 84k of 400k
    final_scale: float = 0.1
    batch_size: int = 16
    clip: float = 1.0
    seed: int = 0
    checkpoint_every: int = 0


def _save(path, model, opt, step, cfg, gen):
    state = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "step": step,
        "lm_config": model.config_dict(),
        "train_config": asdict(cfg),
        # RNG streams: the batch sampler and the global generators that drive dropout
        "rng": {
            "batches": gen.get_state(),
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        },
    }
    with atomic_write(path, "wb") as f:
        torch.save(state, f)
    check = torch.load(path, map_location="cpu", weights_only=True)  # read back: a torn write fails here
    if check.get("step") != step:
        raise RuntimeError(f"{path}: checkpoint read back with step {check.get('step')}, expected {step}")


def _restore_rng(state: dict, path, gen: torch.Generator) -> None:
    rng = state.get("rng")
    if not isinstance(rng, dict) or "batches" not in rng or "torch" not in rng:
        raise ValueError(f"{path}: checkpoint has no RNG state, so the run cannot be resumed exactly")
    gen.set_state(rng["batches"])
    torch.set_rng_state(rng["torch"])
    if rng.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


def load_lm_checkpoint(path) -> tuple[SyllableLM, dict]:
    state = torch.load(path, map_location="cpu", weights_only=True)
    if "model" not in state or "lm_config" not in state:
        raise ValueError(f"{path} is not a SyllableLM checkpoint written by train_lm")
    model = SyllableLM(SyllableLMConfig(**state["lm_config"]))
    model.load_state_dict(state["model"])
    return model, state


def train_lm(
    model: SyllableLM,
    sequences: Sequence,
    cfg: LMTrainConfig | None = None,
    checkpoint: str | Path | None = None,
    resume: bool = True,
    verbose: bool = False,
    until: int | None = None,
) -> list[float]:
    """Train on unit sequences (random mini-batches). Resumes from ``checkpoint`` when it exists.

    A resumed run is exact: the checkpoint holds the model, the optimizer, the step and the RNG states (batch
    sampler and the global generator that drives dropout), so ``until=k`` then a resume equals one straight run.
    ``until`` stops after step ``k`` (the schedule still spans ``cfg.steps``) and writes the checkpoint.
    """
    cfg = cfg or LMTrainConfig()
    if not sequences:
        raise ValueError("no training sequences")
    end = cfg.steps if until is None else int(until)
    if not 0 <= end <= cfg.steps:
        raise ValueError(f"until must lie in [0, {cfg.steps}], got {until}")
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    start = 0
    gen = torch.Generator().manual_seed(cfg.seed)
    if checkpoint is not None and resume and Path(checkpoint).exists():
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        for key in ("model", "optimizer", "step"):
            if key not in state:
                raise ValueError(f"{checkpoint}: not a train_lm checkpoint (missing {key!r})")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = int(state["step"])
        _restore_rng(state, checkpoint, gen)
    losses = []
    model.train()
    for step in progress(range(start, end), desc="lm", disable=not verbose):
        for g in opt.param_groups:
            g["lr"] = cfg.lr * tri_stage_lr(step, cfg.steps, cfg.warmup, cfg.hold, final_scale=cfg.final_scale)
        idx = torch.randint(len(sequences), (cfg.batch_size,), generator=gen).tolist()
        loss = model.loss([sequences[i] for i in idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        losses.append(loss.item())
        if checkpoint is not None and cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0:
            _save(checkpoint, model, opt, step + 1, cfg, gen)
    if checkpoint is not None:
        _save(checkpoint, model, opt, max(end, start), cfg, gen)
    model.eval()
    return losses


@torch.no_grad()
def pair_accuracy(model: SyllableLM, pairs: Sequence, normalize: bool = False) -> float:
    """Fraction of (good, bad) unit-sequence pairs where the good one has the higher log-likelihood (ties: 0.5)."""
    if not pairs:
        raise ValueError("no pairs")
    model.eval()
    good = model.score([p[0] for p in pairs], normalize=normalize)
    bad = model.score([p[1] for p in pairs], normalize=normalize)
    return float(((good > bad).float() + 0.5 * (good == bad).float()).mean())
