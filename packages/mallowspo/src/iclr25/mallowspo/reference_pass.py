"""Reference-model pass without the full [B, T, V] logits: backbone hidden states, then the LM head on row chunks,
each chunk reduced at once to (label log-prob, entropy) by ``kernels.logp_entropy`` (Triton on CUDA).

Only used for models whose logits are exactly ``lm_head(base_model(...).last_hidden_state)``: configs with logit
soft-capping or scaling (Gemma-2, Cohere, Granite, ...) fall back to the ordinary forward.
"""

from __future__ import annotations

import torch

from .dispersion import normalised_sequence_entropy
from .kernels import logp_entropy
from .logps import completion_labels

__all__ = ["reference_sequence_stats", "reference_token_stats", "supports_chunked_head"]

_LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "logits_scaling",
    "output_multiplier",
    "lm_head_multiplier",
)


def supports_chunked_head(model) -> bool:
    """True when logits = lm_head(last hidden state) with no extra transform, so chunking the head is exact."""
    cfg = getattr(model, "config", None)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if cfg is None or head is None or not isinstance(head, torch.nn.Linear) or not hasattr(model, "base_model"):
        return False
    if model.base_model is model:
        return False
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return all(getattr(text_cfg, name, None) in (None, 1.0) for name in _LOGIT_TRANSFORMS)


@torch.no_grad()
def reference_token_stats(
    model, input_ids, attention_mask, labels, chunk_rows: int = 4096, vocab_size: int | None = None, backend="auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position (log p(next label), entropy in nats), each [B, T-1], 0 where the next label is ignored.

    ``vocab_size`` restricts only the entropy to the first ``vocab_size`` logits (padded vocabularies); the label
    log-probs always use the full softmax, exactly as the policy's, so policy = reference gives zero implicit
    rewards. Falls back to the full forward when :func:`supports_chunked_head` is False.
    """
    logp, ent, _ = _reference_token_stats(model, input_ids, attention_mask, labels, chunk_rows, vocab_size, backend)
    return logp, ent


def _reference_token_stats(model, input_ids, attention_mask, labels, chunk_rows, vocab_size, backend):
    """:func:`reference_token_stats` plus the width of the reference logits (V of the ln V normalisation)."""
    shift_labels = labels[:, 1:]
    if not supports_chunked_head(model):
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
        return (*_stats(logits, shift_labels, vocab_size, backend), int(logits.shape[-1]))
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]
    head = model.get_output_embeddings()
    b, t = shift_labels.shape
    flat_h = hidden.reshape(b * t, -1)
    flat_y = shift_labels.reshape(-1)
    keep = (flat_y != -100).nonzero(as_tuple=True)[0]  # only completion positions need the head
    logp = torch.zeros(b * t, dtype=torch.float32, device=hidden.device)
    ent = torch.zeros(b * t, dtype=torch.float32, device=hidden.device)
    width = int(head.out_features)
    for start in range(0, keep.numel(), chunk_rows):
        idx = keep[start : start + chunk_rows]
        chunk_logits = head(flat_h[idx])
        width = int(chunk_logits.shape[-1])
        lp, en = _stats(chunk_logits, flat_y[idx], vocab_size, backend)
        logp[idx], ent[idx] = lp, en
    return logp.view(b, t), ent.view(b, t), width


def _stats(logits, labels, vocab_size, backend):
    """(label log-prob over the full vocabulary, entropy over the first ``vocab_size`` logits or all of them)."""
    if vocab_size is None or int(vocab_size) == logits.shape[-1]:
        return logp_entropy(logits, labels, backend=backend)
    if not 2 <= int(vocab_size) <= logits.shape[-1]:
        raise ValueError(f"vocab_size must be in [2, {logits.shape[-1]}] (the model's logits), got {vocab_size}")
    logp, _ = logp_entropy(logits, labels, backend=backend)
    valid = labels != -100
    ent_labels = torch.where(valid, torch.zeros_like(labels), labels)
    _, ent = logp_entropy(logits[..., : int(vocab_size)], ent_labels, backend=backend)
    return logp, ent


@torch.no_grad()
def reference_sequence_stats(
    model,
    batch: dict,
    length_normalization: bool = False,
    entropy_mode: str = "mean",
    vocab_size: int | None = None,
    chunk_rows: int = 4096,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference per-sequence log-probs (summed, or averaged with ``length_normalization``) and normalised
    entropies H̄ (divided by ln V), each [2B], for a collated batch (``collate_preference``).

    V is ``vocab_size`` when given, else the width of the reference logits (as the official ``logits.shape[-1]``;
    read off the logits, not off a weight or ``config.vocab_size``).
    """
    labels = completion_labels(batch["input_ids"], batch["completion_mask"])
    tok_logp, tok_ent, width = _reference_token_stats(
        model, batch["input_ids"], batch["attention_mask"], labels, chunk_rows, vocab_size, backend
    )
    mask = labels[:, 1:] != -100
    logps = (tok_logp * mask).sum(-1)
    if length_normalization:
        logps = logps / mask.sum(-1).clamp(min=1)
    vocab = int(vocab_size) if vocab_size is not None else width
    return logps, normalised_sequence_entropy(tok_ent, mask, vocab, entropy_mode)
