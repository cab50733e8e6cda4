"""Per-sequence log-probabilities of completions, with the causal one-token shift and masking used by TRL.

Convention (TRL ``DPOTrainer``): ``labels`` has the same length as ``input_ids``; prompt and padding positions hold
``ignore_index`` (-100). Logits at position t predict the token at t + 1, so ``logits[:, :-1]`` is scored against
``labels[:, 1:]``.
"""

from __future__ import annotations

import torch

from .kernels import selective_logp

__all__ = ["completion_labels", "sequence_logps", "shift_for_next_token"]


def completion_labels(input_ids: torch.Tensor, completion_mask: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """labels = input_ids where ``completion_mask`` is 1, ``ignore_index`` elsewhere (prompt and padding)."""
    if input_ids.shape != completion_mask.shape:
        raise ValueError(
            f"input_ids {tuple(input_ids.shape)} and completion_mask {tuple(completion_mask.shape)} differ"
        )
    return input_ids.masked_fill(completion_mask == 0, ignore_index)


def shift_for_next_token(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits[:, :-1], labels[:, 1:]) after checking shapes [B, T, V] and [B, T]."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
        raise ValueError(f"logits must be a [B, T, V] tensor, got shape {getattr(logits, 'shape', None)}")
    if not isinstance(labels, torch.Tensor) or tuple(labels.shape) != tuple(logits.shape[:2]):
        raise ValueError(f"labels must be [B, T] = {tuple(logits.shape[:2])}, got {getattr(labels, 'shape', None)}")
    return logits[:, :-1, :], labels[:, 1:]


def sequence_logps(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int = -100,
    length_normalize: bool = False,
    backend: str = "auto",
) -> torch.Tensor:
    """Sum (or mean, with ``length_normalize``) of log p(y_t | y_<t) over completion tokens: [B, T, V] -> [B].

    Rows without completion tokens give 0. Differentiable with respect to ``logits``.
    """
    logits, labels = shift_for_next_token(logits, labels)
    per_token = selective_logp(logits, labels, ignore_index=ignore_index, backend=backend)
    mask = labels != ignore_index
    total = (per_token * mask).sum(-1)
    if length_normalize:
        total = total / mask.sum(-1).clamp(min=1)
    return total
