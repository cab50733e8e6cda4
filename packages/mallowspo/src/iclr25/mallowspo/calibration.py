"""Calibrating phi* (the dispersion scale's multiplier) on a reference model and a preference dataset.

The estimator is c(x) = -phi* log H̄(x). Its level depends on the model and the data: a near-uniform reference (a
random-init model, H̄ ≈ 1) gives c ≈ 0 and a flat loss at the official phi* = 0.29, a very confident one a large c.
The official default 0.29 was set for Llama-3-8B-Instruct on UltraFeedback. :func:`calibrate_phi_star` picks phi*
so that the dataset mean of c(x) equals ``target_mean_scale`` (default 1): on average MallowsPO-θ is then as sharp
as DPO at the same β, so β keeps its usual meaning and only the per-prompt *relative* dispersion changes the loss.
For MallowsPO-ϕ, ϕ(x) = exp(-c(x)).
"""

from __future__ import annotations

import math

import torch

from iclr25.shared import progress

from .data.preference import collate_preference
from .reference_pass import reference_sequence_stats

__all__ = ["calibrate_phi_star", "phi_star_from_entropy"]


def _summary(x: torch.Tensor) -> dict:
    x = x.double()
    return {
        "mean": float(x.mean()),
        "min": float(x.min()),
        "median": float(x.median()),
        "max": float(x.max()),
    }


def phi_star_from_entropy(
    h_chosen: torch.Tensor,
    h_rejected: torch.Tensor,
    target_mean_scale: float = 1.0,
    eps: float = 1e-6,
) -> dict:
    """phi* = target / mean_x(-log max(H̄(x), eps)) with H̄ = (h_chosen + h_rejected) / 2, and summaries.

    Returns ``{"phi_star", "n_pairs", "entropy", "scale", "phi"}`` where ``entropy``, ``scale`` (c with the
    calibrated phi*) and ``phi`` (exp(-c)) are {mean, min, median, max}. Raises ``ValueError`` when the entropies
    are empty, NaN, negative, or all >= 1 (a uniform reference carries no dispersion information).
    """
    if not (isinstance(target_mean_scale, (int, float)) and math.isfinite(target_mean_scale) and target_mean_scale > 0):
        raise ValueError(f"target_mean_scale must be a finite number > 0, got {target_mean_scale!r}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1), got {eps}")
    hc = torch.as_tensor(h_chosen, dtype=torch.float64).reshape(-1)
    hr = torch.as_tensor(h_rejected, dtype=torch.float64).reshape(-1)
    if hc.shape != hr.shape or hc.numel() == 0:
        raise ValueError(f"h_chosen {tuple(hc.shape)} and h_rejected {tuple(hr.shape)} must be equal and non-empty")
    h = 0.5 * (hc + hr)
    if bool((torch.isnan(h) | (h < 0)).any()):
        raise ValueError("normalised entropies must be >= 0 and not NaN")
    neg_log_h = -torch.log(h.clamp(min=eps))
    mean = float(neg_log_h.mean())
    if not mean > 0:
        raise ValueError(
            "the mean normalised reference entropy is >= 1 (uniform reference, or mode='sum'): -log H̄ has no "
            "positive mean, so no phi* > 0 gives the target scale"
        )
    phi_star = float(target_mean_scale) / mean
    scale = phi_star * neg_log_h
    return {
        "phi_star": phi_star,
        "n_pairs": int(h.numel()),
        "entropy": _summary(h),
        "scale": _summary(scale),
        "phi": _summary(torch.exp(-scale)),
    }


@torch.no_grad()
def calibrate_phi_star(
    ref_model,
    examples: list[dict],
    pad_token_id: int = 0,
    target_mean_scale: float = 1.0,
    entropy_mode: str = "mean",
    vocab_size: int | None = None,
    batch_size: int = 16,
    chunk_rows: int = 4096,
    eps: float = 1e-6,
    backend: str = "auto",
) -> dict:
    """Run the frozen ``ref_model`` over tokenised ``examples`` (``tokenize_preference``) and return
    :func:`phi_star_from_entropy` of their normalised entropies. Use the result as
    ``MallowsPOConfig(phi_star=result["phi_star"], ...)`` with the same ``entropy_mode`` and ``vocab_size``."""
    if not examples:
        raise ValueError("calibrate_phi_star needs at least one tokenised example")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = next(ref_model.parameters()).device
    was_training = ref_model.training
    ref_model.eval()
    hc, hr = [], []
    try:
        for start in progress(range(0, len(examples), batch_size), desc="calibrate", leave=False):
            chunk = examples[start : start + batch_size]
            batch = collate_preference(
                [{k: ex[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")} for ex in chunk], pad_token_id
            )
            batch = {k: v.to(device) for k, v in batch.items()}
            _, ent = reference_sequence_stats(
                ref_model,
                batch,
                entropy_mode=entropy_mode,
                vocab_size=vocab_size,
                chunk_rows=chunk_rows,
                backend=backend,
            )
            a, b = ent.chunk(2)
            hc.append(a.cpu())
            hr.append(b.cpu())
    finally:
        ref_model.train(was_training)
    return phi_star_from_entropy(torch.cat(hc), torch.cat(hr), target_mean_scale=target_mean_scale, eps=eps)
