"""Preference losses on per-sequence log-probabilities: DPO, MallowsPO-theta, MallowsPO-IPO, MallowsPO-phi.

All take the summed (or length-normalised) log-probs of the chosen/rejected completions under the policy and the
reference, each of shape [B], and return the per-example loss (``reduction="none"``) or its mean (default).

MallowsPO-theta (Chen et al., ICLR 2025, eq. for MallowsPO-θ; official ``dpo_loss`` with ``mallows_dpo``) puts the
prompt's dispersion scale c(x) = -log phi(x) inside the DPO sigmoid:

    L = -(1-eps) log σ(β c(x) Δ) - eps log σ(-β c(x) Δ),   Δ = (π_w - π_l) - (ref_w - ref_l) - home_advantage.

With c ≡ 1 it is DPO. The scale is treated as a constant: no gradient flows into it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .mallows import log_g_phi

__all__ = ["dpo_loss", "mallows_ipo_loss", "mallows_phi_loss", "mallows_theta_loss", "preference_logits"]


def _reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _as_batch(name: str, x, like: torch.Tensor | None = None) -> torch.Tensor:
    if like is not None and not isinstance(x, torch.Tensor):
        return torch.as_tensor(x, dtype=like.dtype, device=like.device)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of per-sequence log-probs [B], got {type(x).__name__}")
    if x.dim() != 1:
        raise ValueError(f"{name} must have shape [B], got {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (shape [0]); a preference loss needs at least one pair")
    return x


def preference_logits(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor | None,
    ref_rejected: torch.Tensor | None,
    home_advantage: float = 0.0,
    reference_free: bool = False,
    mixing_alpha: float | None = None,
) -> torch.Tensor:
    """Δ = (π_w - π_l) - a (ref_w - ref_l) - (1 - a or 1) * home_advantage, as in the official ``dpo_loss``.

    ``reference_free`` drops the reference term; ``mixing_alpha`` = a mixes the reference margin and the home
    advantage (official ``if_mixing_alpha``): (π_w - π_l) - a (ref_w - ref_l) - (1 - a) home_advantage.
    """
    pc = _as_batch("policy_chosen", policy_chosen)
    pr = _as_batch("policy_rejected", policy_rejected)
    if pc.shape != pr.shape:
        raise ValueError(f"policy_chosen {tuple(pc.shape)} and policy_rejected {tuple(pr.shape)} differ")
    logits = pc - pr
    if reference_free:
        ref_margin = torch.zeros_like(logits)
    else:
        if ref_chosen is None or ref_rejected is None:
            raise ValueError("ref_chosen and ref_rejected are required unless reference_free=True")
        rc = _as_batch("ref_chosen", ref_chosen, pc)
        rr = _as_batch("ref_rejected", ref_rejected, pc)
        if rc.shape != pc.shape or rr.shape != pc.shape:
            raise ValueError("reference log-probs must have the same shape [B] as the policy log-probs")
        ref_margin = (rc - rr).detach()
    if mixing_alpha is None:
        return logits - ref_margin - home_advantage
    if not 0.0 <= mixing_alpha <= 1.0:
        raise ValueError(f"mixing_alpha must lie in [0, 1], got {mixing_alpha}")
    return logits - mixing_alpha * ref_margin - (1.0 - mixing_alpha) * home_advantage


def _scale(neg_log_dispersion, like: torch.Tensor, name: str = "neg_log_dispersion") -> torch.Tensor:
    c = torch.as_tensor(neg_log_dispersion, dtype=like.dtype, device=like.device).detach()
    if c.dim() > 1 or (c.dim() == 1 and c.shape[0] != like.shape[0]):
        raise ValueError(f"{name} must be a scalar or have shape [B]={tuple(like.shape)}, got {tuple(c.shape)}")
    return c


def _check_scale(c: torch.Tensor) -> torch.Tensor:
    """The dispersion scale c(x) = -log phi(x) must be finite and >= 0 (phi in (0, 1])."""
    bad = ~torch.isfinite(c) | (c < 0)
    if bool(bad.any()):
        vals = c.reshape(-1)[bad.reshape(-1)][:8].tolist()
        raise ValueError(
            f"neg_log_dispersion must be finite and >= 0 (c = -log phi with phi in (0, 1]); got {vals}. A negative "
            "scale flips the loss (it comes from sequence_entropy(mode='sum') with a normalised entropy > 1); NaN "
            "comes from NaN reference logits."
        )
    return c


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float = 0.1,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """DPO (Rafailov et al., 2023) sigmoid loss, with conservative label smoothing (cDPO) as in TRL."""
    return mallows_theta_loss(
        policy_chosen,
        policy_rejected,
        ref_chosen,
        ref_rejected,
        1.0,
        beta=beta,
        label_smoothing=label_smoothing,
        reduction=reduction,
    )


def mallows_theta_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor | None,
    ref_rejected: torch.Tensor | None,
    neg_log_dispersion,
    beta: float = 0.1,
    label_smoothing: float = 0.0,
    home_advantage: float = 0.0,
    reference_free: bool = False,
    mixing_alpha: float | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """MallowsPO-θ: -(1-ε) log σ(β c Δ) - ε log σ(-β c Δ) with c = ``neg_log_dispersion`` (scalar or [B]).

    See :func:`preference_logits` for Δ. ``c`` is detached. Length normalisation (SimPO-style) is done upstream by
    passing averaged log-probs (``sequence_logps(..., length_normalize=True)``).
    """
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    if not 0.0 <= label_smoothing < 0.5:
        raise ValueError(f"label_smoothing must lie in [0, 0.5), got {label_smoothing}")
    logits = preference_logits(
        policy_chosen, policy_rejected, ref_chosen, ref_rejected, home_advantage, reference_free, mixing_alpha
    )
    z = beta * _check_scale(_scale(neg_log_dispersion, logits)) * logits
    loss = -(1.0 - label_smoothing) * F.logsigmoid(z)
    if label_smoothing:
        loss = loss - label_smoothing * F.logsigmoid(-z)
    return _reduce(loss, reduction)


def mallows_ipo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor | None,
    ref_rejected: torch.Tensor | None,
    neg_log_dispersion,
    beta: float = 0.1,
    convention: str = "official",
    home_advantage: float = 0.0,
    reference_free: bool = False,
    mixing_alpha: float | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """MallowsPO-IPO: the IPO square loss with the dispersion scale c on the margin.

    ``convention="official"`` (haoxian-chen/MallowsPO): (c Δ - 1/(2β))^2; ``"rainbow"`` (RainbowPO):
    (β c Δ - 1/2)^2 = β^2 times the official loss, with the same minimiser c Δ = 1/(2β).
    """
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    logits = preference_logits(
        policy_chosen, policy_rejected, ref_chosen, ref_rejected, home_advantage, reference_free, mixing_alpha
    )
    c = _check_scale(_scale(neg_log_dispersion, logits))
    if convention == "official":
        loss = (c * logits - 1.0 / (2.0 * beta)) ** 2
    elif convention == "rainbow":
        loss = (beta * c * logits - 0.5) ** 2
    else:
        raise ValueError(f"convention must be 'official' or 'rainbow', got {convention!r}")
    return _reduce(loss, reduction)


def mallows_phi_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor | None,
    ref_rejected: torch.Tensor | None,
    phi,
    beta: float = 0.1,
    home_advantage: float = 0.0,
    reference_free: bool = False,
    reduction: str = "mean",
) -> torch.Tensor:
    """MallowsPO-ϕ: -log g_ϕ(β Δ), the Mallows-ϕ pairwise law as link instead of the sigmoid.

    ``phi`` is the dispersion ϕ(x) in (0, 1] (scalar or [B]; e.g. ``exp(-neg_log_dispersion)``), detached.
    g_ϕ(s) = (s+1)/(1-ϕ^(s+1)) - s/(1-ϕ^s) for s > 0 and 1 - g_ϕ(-s) for s < 0; the link jumps at 0 and we take
    its right limit there, value g_ϕ(0+) = 1/(1-ϕ) + 1/log ϕ and slope g_ϕ'(0+) = (1-ϕ+ϕ log ϕ)/(1-ϕ)² - 1/2 > 0
    (derivation in :func:`iclr25.mallowspo.mallows.g_phi_at_zero`). So at π = π_ref (Δ = 0) the loss is
    -log g_ϕ(0+) and its gradient, -β g_ϕ'(0+)/g_ϕ(0+) per unit of Δ, raises the chosen log-prob. Computed in
    float64 log space (:func:`iclr25.mallowspo.mallows.log_g_phi`).
    """
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    logits = preference_logits(policy_chosen, policy_rejected, ref_chosen, ref_rejected, home_advantage, reference_free)
    phi_t = _scale(phi, logits, name="phi").to(torch.float64)
    bad = torch.isnan(phi_t) | (phi_t <= 0) | (phi_t > 1)
    if bool(bad.any()):
        raise ValueError(f"phi must lie in (0, 1] (no NaN); got {phi_t.reshape(-1)[bad.reshape(-1)][:8].tolist()}")
    loss = -log_g_phi(beta * logits, phi_t)
    return _reduce(loss, reduction)
