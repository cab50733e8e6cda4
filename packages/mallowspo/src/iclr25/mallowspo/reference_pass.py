"""Reference-model pass without the full [B, T, V] logits: backbone hidden states, then the LM head on row chunks,
each chunk reduced at once to (label log-prob, entropy) by ``kernels.logp_entropy`` (Triton on CUDA).

Only used for models whose logits are exactly ``lm_head(base_model(...).last_hidden_state)``: configs with logit
soft-capping or scaling (Gemma-2, Cohere, Granite, ...) fall back to the ordinary forward.
"""

from __future__ import annotations

import torch

from .kernels import logp_entropy

__all__ = ["reference_token_stats", "supports_chunked_head"]

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

    ``vocab_size`` restricts the entropy and log-probs to the first ``vocab_size`` logits (padded vocabularies).
    Falls back to the full forward when :func:`supports_chunked_head` is False.
    """
    shift_labels = labels[:, 1:]
    if not supports_chunked_head(model):
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
        if vocab_size is not None:
            logits = logits[..., :vocab_size]
        return logp_entropy(logits, shift_labels, backend=backend)
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]
    head = model.get_output_embeddings()
    b, t = shift_labels.shape
    flat_h = hidden.reshape(b * t, -1)
    flat_y = shift_labels.reshape(-1)
    keep = (flat_y != -100).nonzero(as_tuple=True)[0]  # only completion positions need the head
    logp = torch.zeros(b * t, dtype=torch.float32, device=hidden.device)
    ent = torch.zeros(b * t, dtype=torch.float32, device=hidden.device)
    for start in range(0, keep.numel(), chunk_rows):
        idx = keep[start : start + chunk_rows]
        logits = head(flat_h[idx])
        if vocab_size is not None:
            logits = logits[:, :vocab_size]
        lp, en = logp_entropy(logits, flat_y[idx], backend=backend)
        logp[idx], ent[idx] = lp, en
    return logp.view(b, t), ent.view(b, t)
