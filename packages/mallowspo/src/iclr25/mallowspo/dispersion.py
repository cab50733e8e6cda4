"""The MallowsPO dispersion estimator: reference-model next-token entropy -> -log phi(x).

Paper (Chen et al., ICLR 2025, Sec. 4) approximates the dispersion of a prompt by the entropy of the reference
policy along the two responses:

    -log phi(x) ≈ -phi_star * log( (1 / (2 log V)) * sum_i [H(Y_{i+1} | y_w,<=i) + H(Y_{i+1} | y_l,<=i)] ).

The official code (haoxian-chen/MallowsPO, ``get_batch_logps``) takes the per-token *mean* over completion tokens
instead of the sum, so the normalised entropy H̄ lies in [0, 1] and -log H̄ >= 0. We default to the mean
(``mode="mean"``); ``mode="sum"`` is the paper's literal form and warns, because for long responses its argument
exceeds 1 and the scale turns negative, which flips the loss.
"""

from __future__ import annotations

import math
import warnings

import torch

from .kernels import logp_entropy
from .logps import shift_for_next_token

__all__ = ["neg_log_dispersion", "normalised_sequence_entropy", "sequence_entropy", "token_entropy"]

PHI_STAR = 0.29  # official: neg_log_dispersion_mean = 0.29 (haoxian-chen/MallowsPO mallowsPO_config.py)


def token_entropy(logits: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
    """Entropy (nats) of softmax(logits) over the last dim, float32, no gradient.

    With ``chunk_size`` the rows are processed ``chunk_size`` at a time, so at most that many float32 rows of
    [V] temporaries exist at once (the "chunked" torch path of the memory benchmark).
    """
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError("logits must be a floating torch.Tensor [..., V]")
    with torch.no_grad():
        flat = logits.reshape(-1, logits.shape[-1])
        step = flat.shape[0] if chunk_size is None else int(chunk_size)
        if step <= 0 and flat.shape[0] > 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        out = torch.empty(flat.shape[0], dtype=torch.float32, device=logits.device)
        for start in range(0, flat.shape[0], max(step, 1)):
            z = flat[start : start + step].float()
            logp = torch.log_softmax(z, dim=-1)
            p = logp.exp()
            out[start : start + step] = -torch.where(p == 0, torch.zeros_like(p), p * logp).sum(-1)
        return out.view(logits.shape[:-1])


def sequence_entropy(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int = -100,
    mode: str = "mean",
    vocab_size: int | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Normalised reference entropy along each completion: [B, T, V] logits, [B, T] labels -> [B] float32.

    Position t's logits predict token t + 1 (one-token shift); only positions whose next label is not
    ``ignore_index`` count. Each entropy is divided by ln V, with V = ``vocab_size`` if given (the first
    ``vocab_size`` logits are used, dropping padded embedding rows) else ``logits.shape[-1]`` (as the official
    code). ``vocab_size`` restricts only the entropy; label log-probs elsewhere always use the full softmax.
    ``mode="mean"`` (default, official code) averages over completion tokens and lies in [0, 1]; ``mode="sum"``
    sums them (the paper's formula). Never differentiable.

    Raises ``ValueError`` for a row without completion tokens (its entropy is undefined; clamping it would give the
    maximum dispersion scale) and for NaN logits at completion positions.
    """
    if mode not in ("mean", "sum"):
        raise ValueError(f"mode must be 'mean' or 'sum', got {mode!r}")
    if mode == "sum":
        warnings.warn(
            "sequence_entropy(mode='sum') is the paper's literal form; for long responses the normalised entropy "
            "exceeds 1 and -log(H) turns negative, flipping the MallowsPO loss. The official code uses mode='mean'.",
            UserWarning,
            stacklevel=2,
        )
    logits, labels = shift_for_next_token(logits, labels)
    v = logits.shape[-1]
    if vocab_size is not None:
        if not 2 <= int(vocab_size) <= v:
            raise ValueError(f"vocab_size must be in [2, {v}] (logits' last dim), got {vocab_size}")
        v = int(vocab_size)
        logits = logits[..., :v]
    if v < 2:
        raise ValueError("entropy normalisation by ln V needs a vocabulary of at least 2 tokens")
    valid = labels != ignore_index
    # only the entropy is needed here: give valid positions label 0 so labels >= vocab_size are not an error
    ent_labels = torch.where(valid, torch.zeros_like(labels), labels)
    with torch.no_grad():
        _, ent = logp_entropy(logits.detach(), ent_labels, ignore_index=ignore_index, backend=backend)
        return normalised_sequence_entropy(ent, valid, v, mode)


def normalised_sequence_entropy(token_entropy: torch.Tensor, mask: torch.Tensor, vocab_size: int, mode: str = "mean"):
    """[B, T] per-token entropies (nats) and a completion mask -> [B] sum (``mode="sum"``) or mean over masked
    tokens, divided by ln(vocab_size). The reduction step of :func:`sequence_entropy`.

    Raises ``ValueError`` when a row has no completion token or its entropy is not finite (NaN logits)."""
    if mode not in ("mean", "sum"):
        raise ValueError(f"mode must be 'mean' or 'sum', got {mode!r}")
    if token_entropy.shape != mask.shape or token_entropy.dim() != 2:
        raise ValueError(
            f"token_entropy {tuple(token_entropy.shape)} and mask {tuple(mask.shape)} must be equal [B, T]"
        )
    if token_entropy.shape[0] == 0:
        raise ValueError("empty batch: no sequences to compute the entropy of")
    mask = mask.bool()
    n_tokens = mask.sum(-1)
    empty = (n_tokens == 0).nonzero(as_tuple=True)[0]
    if empty.numel():
        raise ValueError(
            f"rows {empty[:8].tolist()} have no completion tokens (all labels ignored): their reference entropy is "
            "undefined (a clamped 0 would give the maximum dispersion scale); drop or fix these completions"
        )
    masked = torch.where(mask, token_entropy, torch.zeros_like(token_entropy))
    bad = (~torch.isfinite(masked)).any(-1).nonzero(as_tuple=True)[0]
    if bad.numel():
        raise ValueError(
            f"reference entropy is not finite in rows {bad[:8].tolist()}: the logits contain NaN/inf there"
        )
    total = masked.sum(-1) / math.log(vocab_size)
    if mode == "mean":
        total = total / n_tokens
    return total


def neg_log_dispersion(
    h_chosen: torch.Tensor,
    h_rejected: torch.Tensor | None = None,
    phi_star: float = PHI_STAR,
    eps: float = 1e-6,
) -> torch.Tensor:
    """c(x) = -log phi(x) = -phi_star * log(H̄), H̄ = (h_chosen + h_rejected) / 2, clamped to H̄ >= eps; no grad.

    ``eps`` keeps the scale finite when the reference model is (near) deterministic (H̄ -> 0 would make it explode);
    with the default the largest scale is -0.29 * log(1e-6) ≈ 4.0.
    """
    if not phi_star > 0:
        raise ValueError(f"phi_star must be > 0, got {phi_star}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1), got {eps}")
    h = torch.as_tensor(h_chosen).detach().float()
    if h_rejected is not None:
        h_r = torch.as_tensor(h_rejected).detach().float()
        if h_r.shape != h.shape:
            raise ValueError(f"h_chosen {tuple(h.shape)} and h_rejected {tuple(h_r.shape)} differ")
        h = 0.5 * (h + h_r)
    if h.numel() == 0:
        raise ValueError("neg_log_dispersion got an empty batch")
    if bool((torch.isnan(h) | (h < 0)).any()):
        raise ValueError(f"normalised entropies must be >= 0 and not NaN, got {h.reshape(-1)[:8].tolist()}")
    if bool((h > 1).any()):
        warnings.warn(
            "normalised entropy > 1 (mode='sum'?): the dispersion scale -phi_star*log(H) is negative there",
            UserWarning,
            stacklevel=2,
        )
    return -phi_star * torch.log(h.clamp(min=eps))
