"""SylBoost: distil a frozen teacher's segment-averaged features into a student, then re-segment with it.

Targets (SegmentalSSE Segmenter2 + spokencoco collate): for each pseudo-syllable ``[b, e)`` of length ``L``, the mean
teacher feature over its inner third ``[b + int(0.33 L), e - int((1 - 0.67) L))`` (all frames when ``L < 3``; the
float expression reproduces the official convention, e.g. ``[33, 68)`` for ``L = 100``). Every frame of the segment
gets that target; the loss is the MSE between student frames and targets over non-padded frames. The teacher is a
frozen copy of the initial model (no EMA); optimisation is BertAdam (lr 5e-5, 10 % linear warmup then linear decay,
per-parameter gradient clipping at 1.0, weight decay 0.01), CNN frozen.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn

from .config import SylBoostConfig

__all__ = ["BertAdam", "SylBoostTrainer", "inner_span", "segment_targets", "sylboost_loss"]


def inner_span(start: int, end: int, lo: float = SylBoostConfig.inner_lo, hi: float = SylBoostConfig.inner_hi):
    """Inner frames ``[a, b)`` of a segment ``[start, end)`` (all of it below 3 frames)."""
    length = end - start
    if length < 3:
        return start, end
    return start + int(lo * length), end - int((1 - hi) * length)


def segment_targets(
    teacher_feats: torch.Tensor,
    borders: Sequence,
    lo: float = SylBoostConfig.inner_lo,
    hi: float = SylBoostConfig.inner_hi,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-frame targets ``[B, T, D]`` and the valid-frame mask ``[B, T]`` from per-utterance borders.

    teacher_feats: ``[B, T, D]`` (or ``[T, D]`` with one border sequence). Frames past an utterance's last border
    are padding (mask False, target 0).
    """
    if teacher_feats.ndim == 2:
        teacher_feats, borders = teacher_feats.unsqueeze(0), [borders]
    bsz, t, _ = teacher_feats.shape
    if len(borders) != bsz:
        raise ValueError(f"{len(borders)} border sequences for a batch of {bsz}")
    targets = torch.zeros_like(teacher_feats)
    valid = torch.zeros(bsz, t, dtype=torch.bool, device=teacher_feats.device)
    for i, b in enumerate(borders):
        b = [int(v) for v in torch.as_tensor(b).reshape(-1).tolist()]
        if b[0] != 0 or b[-1] > t or any(e <= s for s, e in zip(b[:-1], b[1:])):
            raise ValueError(f"borders must increase strictly from 0 to at most T={t}, got {b}")
        for s, e in zip(b[:-1], b[1:]):
            a, z = inner_span(s, e, lo, hi)
            targets[i, s:e] = teacher_feats[i, a:z].mean(0)
        valid[i, : b[-1]] = True
    return targets, valid


def sylboost_loss(student_feats: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean squared error over valid frames and channels."""
    diff = (student_feats - targets).pow(2).mean(-1)
    return (diff * valid).sum() / valid.sum().clamp(min=1)


class BertAdam(torch.optim.Optimizer):
    """BERT's Adam: no bias correction, decoupled weight decay, per-parameter grad-norm clipping, warmup-linear lr.

    ``lr_t = lr * (p / warmup if p < warmup else max((p - 1) / (warmup - 1), 0))`` with ``p = step / t_total``.
    """

    def __init__(
        self,
        params,
        lr: float = SylBoostConfig.lr,
        warmup: float = SylBoostConfig.warmup,
        t_total: int = -1,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-6,
        weight_decay: float = SylBoostConfig.weight_decay,
        max_grad_norm: float = SylBoostConfig.clip,
    ):
        if lr <= 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        defaults = dict(
            lr=lr,
            warmup=warmup,
            t_total=t_total,
            b1=b1,
            b2=b2,
            eps=eps,
            weight_decay=weight_decay,
            max_grad_norm=max_grad_norm,
        )
        super().__init__(params, defaults)

    @staticmethod
    def schedule(progress: float, warmup: float) -> float:
        if progress < warmup:
            return progress / warmup
        return max((progress - 1.0) / (warmup - 1.0), 0.0)

    @torch.no_grad()
    def step(self, closure: Callable | None = None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["m"] = torch.zeros_like(p)
                    st["v"] = torch.zeros_like(p)
                g = p.grad
                if group["max_grad_norm"] > 0:
                    norm = g.norm()
                    if norm > group["max_grad_norm"]:
                        g = g * (group["max_grad_norm"] / norm)
                st["m"].mul_(group["b1"]).add_(g, alpha=1 - group["b1"])
                st["v"].mul_(group["b2"]).addcmul_(g, g, value=1 - group["b2"])
                update = st["m"] / (st["v"].sqrt() + group["eps"])
                if group["weight_decay"] > 0:
                    update = update + group["weight_decay"] * p
                scale = 1.0
                if group["t_total"] > 0:
                    scale = self.schedule(st["step"] / group["t_total"], group["warmup"])
                p.add_(update, alpha=-group["lr"] * scale)
                st["step"] += 1
        return loss


FeatureFn = Callable[[nn.Module, torch.Tensor], torch.Tensor]


class SylBoostTrainer:
    """Distil segment-averaged features of a frozen copy of ``model`` into ``model`` itself.

    ``feature_fn(model, wav_batch) -> [B, T, D]`` extracts the distilled layer (e.g. HuBERT layer 10 officially;
    the last layer of our small encoder). ``frozen_prefixes`` name parameters kept fixed (the CNN, official
    ``feature_grad_mult 0``).
    """

    def __init__(
        self,
        model: nn.Module,
        feature_fn: FeatureFn,
        config: SylBoostConfig | None = None,
        total_steps: int = 100,
        frozen_prefixes: Sequence[str] = ("hubert.feature_extractor",),
    ):
        self.config = config or SylBoostConfig()
        self.student = model
        self.teacher = copy.deepcopy(model).eval()
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        self.feature_fn = feature_fn
        params = []
        for name, p in self.student.named_parameters():
            frozen = self.config.freeze_cnn and any(name.startswith(f) for f in frozen_prefixes)
            p.requires_grad_(not frozen)
            if not frozen:
                params.append(p)
        self.optimizer = BertAdam(
            params,
            lr=self.config.lr,
            warmup=self.config.warmup,
            t_total=total_steps,
            weight_decay=self.config.weight_decay,
            max_grad_norm=self.config.clip,
        )
        self.steps = 0

    def step(self, wav: torch.Tensor, borders: Sequence) -> float:
        """One update on a zero-padded waveform batch ``[B, S]`` with per-utterance frame borders."""
        with torch.no_grad():
            targets, valid = segment_targets(
                self.feature_fn(self.teacher, wav), borders, self.config.inner_lo, self.config.inner_hi
            )
        self.student.train()
        loss = sylboost_loss(self.feature_fn(self.student, wav), targets, valid)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.steps += 1
        return loss.item()

    def state_dict(self) -> dict:
        return {"student": self.student.state_dict(), "optimizer": self.optimizer.state_dict(), "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.student.load_state_dict(state["student"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])
