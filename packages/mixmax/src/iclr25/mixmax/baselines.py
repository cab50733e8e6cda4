"""Baselines: ERM and group balancing (sample weights, in :mod:`.estimators`) and the online group DRO loss of
Sagawa et al. (2020) for torch models.

GroupDROLoss follows kohpangwei/group_DRO ``LossComputer.compute_robust_loss``: per-group mean losses of the batch
(a group absent from the batch has loss 0), adjusted_loss = group_loss + C / sqrt(n_g), optionally normalised to
sum 1; q <- q * exp(step_size * adjusted_loss), q <- q / sum(q); robust loss = <group_loss, q>.
"""

from __future__ import annotations

import torch
from torch import nn

from .config import GroupDROConfig

__all__ = ["GroupDROLoss"]

_D = GroupDROConfig()


class GroupDROLoss(nn.Module):
    """Online group DRO objective for torch training loops.

    Args:
        n_groups: number of groups G.
        step_size: exponentiated-gradient step on the adversarial group weights q (official default 0.01).
        adjustment: generalisation adjustment C (scalar or [G]); added as C / sqrt(group_counts).
        group_counts: training rows per group [G], needed when ``adjustment`` is nonzero.
        normalize_loss: divide the adjusted losses by their sum before the update.
    Buffers: ``adv_probs`` (current q), ``avg_probs`` (time-average of q over updates), ``n_updates``.
    forward(losses [B], groups [B] in 0..G-1) -> scalar robust loss; q is updated in training mode only.
    """

    def __init__(
        self,
        n_groups: int,
        step_size: float = _D.step_size,
        adjustment=_D.adjustment,
        group_counts=None,
        normalize_loss: bool = _D.normalize_loss,
    ):
        super().__init__()
        if int(n_groups) != n_groups or n_groups < 1:
            raise ValueError(f"n_groups must be a positive integer, got {n_groups!r}")
        if not step_size >= 0:
            raise ValueError(f"step_size must be >= 0, got {step_size!r}")
        adj = torch.as_tensor(adjustment, dtype=torch.float32).expand(n_groups).clone()
        if torch.any(adj != 0):
            if group_counts is None:
                raise ValueError("a nonzero adjustment needs group_counts (training rows per group)")
            counts = torch.as_tensor(group_counts, dtype=torch.float32)
            if counts.shape != (n_groups,) or torch.any(counts <= 0):
                raise ValueError(f"group_counts must be {n_groups} positive counts, got {group_counts!r}")
            adj = adj / counts.sqrt()
        self.n_groups = int(n_groups)
        self.step_size = float(step_size)
        self.normalize_loss = normalize_loss
        self.register_buffer("adj", adj)
        self.register_buffer("adv_probs", torch.full((n_groups,), 1.0 / n_groups))
        self.register_buffer("avg_probs", torch.zeros(n_groups))
        self.register_buffer("n_updates", torch.zeros((), dtype=torch.long))

    def group_losses(self, losses: torch.Tensor, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-group mean loss of the batch [G] (0 for absent groups) and per-group counts [G]."""
        if losses.ndim != 1 or groups.shape != losses.shape:
            raise ValueError(
                f"losses and groups must be 1-D of equal length, got {tuple(losses.shape)}, {tuple(groups.shape)}"
            )
        if groups.is_floating_point() or groups.is_complex() or groups.dtype == torch.bool:
            raise TypeError(f"groups must be an integer tensor of group codes, got {groups.dtype}")
        if not bool(torch.isfinite(losses).all()):
            bad = int(torch.nonzero(~torch.isfinite(losses))[0])
            raise ValueError(f"losses contain NaN or infinite values (first at batch index {bad})")
        groups = groups.long()
        if groups.numel() and (groups.min() < 0 or groups.max() >= self.n_groups):
            raise ValueError(f"groups must be codes in 0..{self.n_groups - 1}")
        onehot = torch.nn.functional.one_hot(groups, self.n_groups).to(losses.dtype)  # [B, G]
        counts = onehot.sum(0)
        return (onehot.T @ losses) / counts.clamp_min(1), counts

    def forward(self, losses: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        group_loss, _ = self.group_losses(losses, groups)
        if self.training:
            with torch.no_grad():
                adjusted = group_loss.detach().float() + self.adj
                if self.normalize_loss:
                    adjusted = adjusted / adjusted.sum()
                q = self.adv_probs * torch.exp(self.step_size * adjusted)
                self.adv_probs.copy_(q / q.sum())
                self.n_updates += 1
                self.avg_probs += (self.adv_probs - self.avg_probs) / self.n_updates.float()
        return group_loss @ self.adv_probs.to(group_loss.dtype)
