"""DELTA's training losses (``models/loss.py`` + ``train.py`` weights), written from their definitions.

All terms are computed per sliding window and the total is divided by the number of windows.
- 2D: sum_i gamma^(I-i-1) * mean |x_i - x_gt| / (W-1, H-1)     (gamma 0.8; lambda_2d = 50, 100 in 2D pretraining)
- depth: the same weighting on | dmax / d_i - dmax / d_gt |, both clamped to >= 0.01, dmax the batch's max depth
- visibility: balanced BCE (mean over visible + mean over occluded, summed, not halved) for sparse tracks (over the
  valid set: frames at or after the query), plain BCE for dense
- confidence: BCE of the confidence against [ ||(x_final - x_gt) / (W-1, H-1)||^2 <= (12 / (W-1))^2 ] (12 px in x),
  multiplied by the ground-truth visibility and averaged over the *valid set* (all points of the window for dense
  tracks, frames at or after the query for sparse), i.e. invisible points count in the denominator as in the
  official ``confidence_loss``.

Deviation (stated): the official training loop feeds sigmoid *probabilities* to ``balanced_bce_loss``, whose formula is
the logistic loss of a logit; we feed the logits, as the formula intends (on probabilities the loss is confined to
[log(1+e^-1), log(1+e)] and its gradient is starved).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

GAMMA = 0.8  # iteration weight base (official)
CONF_THRESHOLD_PX = 12.0  # confidence target: error below 12 px (official)
DEPTH_MIN = 0.01


def _masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return x.mean()
    m = mask.to(x.dtype).expand_as(x)
    return (x * m).sum() / m.sum().clamp(min=1.0)


def iteration_weights(n: int, gamma: float = GAMMA) -> list[float]:
    return [gamma ** (n - i - 1) for i in range(n)]


def coords_loss(preds: list[torch.Tensor], gt: torch.Tensor, image_hw: tuple[int, int], mask=None) -> torch.Tensor:
    """preds: per-iteration [..., 2] pixel coordinates; gt [..., 2]; mask [...] (None: every point, as for dense)."""
    h, w = image_hw
    norm = gt.new_tensor([max(w - 1, 1), max(h - 1, 1)])
    m = None if mask is None else mask[..., None]
    return sum(wt * _masked_mean((p - gt).abs() / norm, m) for wt, p in zip(iteration_weights(len(preds)), preds))


def depth_loss(preds: list[torch.Tensor], gt: torch.Tensor, dmax: float | torch.Tensor, mask=None) -> torch.Tensor:
    """Iteration-weighted L1 on inverse normalised depth |dmax/d_pred - dmax/d_gt| (both clamped to >= 0.01)."""
    inv_gt = dmax / gt.clamp(min=DEPTH_MIN)
    return sum(
        wt * _masked_mean((dmax / p.clamp(min=DEPTH_MIN) - inv_gt).abs(), mask)
        for wt, p in zip(iteration_weights(len(preds)), preds)
    )


def balanced_bce(logits: torch.Tensor, target: torch.Tensor, mask=None) -> torch.Tensor:
    """mean BCE over positives + mean BCE over negatives (official: summed, not halved); a missing class adds 0.

    Positives are target > 0.95, negatives target < 0.05 (official thresholds); ``mask`` restricts both sets.
    """
    t = target.to(logits.dtype)
    bce = F.binary_cross_entropy_with_logits(logits, (t > 0.5).to(logits.dtype), reduction="none")
    pos, neg = (t > 0.95).to(logits.dtype), (t < 0.05).to(logits.dtype)
    if mask is not None:
        pos, neg = pos * mask, neg * mask
    return (bce * pos).sum() / pos.sum().clamp(min=1.0) + (bce * neg).sum() / neg.sum().clamp(min=1.0)


def visibility_loss(logits, target, balanced: bool, mask=None) -> torch.Tensor:
    if balanced:
        return balanced_bce(logits, target, mask)
    return _masked_mean(F.binary_cross_entropy_with_logits(logits, target.to(logits.dtype), reduction="none"), mask)


def confidence_loss(
    conf_logits, pred_final, gt, gt_visible, image_hw: tuple[int, int], valid=None, threshold: float = CONF_THRESHOLD_PX
) -> torch.Tensor:
    """Official confidence loss: BCE against [normalised squared error <= (12/(W-1))^2], times the ground-truth
    visibility, averaged over ``valid`` (None: every point)."""
    h, w = image_hw
    norm = gt.new_tensor([max(w - 1, 1), max(h - 1, 1)])
    err2 = (((pred_final.detach() - gt) / norm) ** 2).sum(-1)
    target = (err2 <= (threshold / max(w - 1, 1)) ** 2).to(conf_logits.dtype)
    bce = F.binary_cross_entropy_with_logits(conf_logits, target, reduction="none")
    return _masked_mean(bce * gt_visible.to(bce.dtype), valid)
