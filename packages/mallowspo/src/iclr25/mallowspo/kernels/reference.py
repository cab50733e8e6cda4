"""Pure-torch references for the Triton kernels in this folder (never imports triton).

* ``fused_logp_entropy_reference``   <-> ``kernels/fused_logp_entropy.py``: per-row log-probability of the label token and the
  full-vocabulary entropy H = -sum_v p_v log p_v of softmax(logits), in float32.
* ``fused_selective_logp_reference`` <-> ``kernels/fused_selective_logp.py``: log softmax(logits)[label], differentiable.

Rows whose label equals ``ignore_index`` give 0 for every output. Logits may contain -inf (masked vocabulary
entries); those entries have probability 0 and contribute 0 to the entropy. NaN logits give NaN outputs on their
row (as in the Triton kernel), so callers can detect them; they are never silently dropped.
"""

from __future__ import annotations

import torch

__all__ = ["fused_logp_entropy_reference", "fused_selective_logp_reference"]


def _gather_label_logp(logp: torch.Tensor, labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    valid = labels != ignore_index
    idx = torch.where(valid, labels, torch.zeros_like(labels)).long()
    out = logp.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
    return torch.where(valid, out, torch.zeros_like(out))


def fused_selective_logp_reference(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100
) -> torch.Tensor:
    """log p(label) = logits[label] - logsumexp(logits), in float32; 0 where ``labels == ignore_index``."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return _gather_label_logp(logp, labels, ignore_index)


def fused_logp_entropy_reference(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(label), entropy) per row in float32, both 0 where ``labels == ignore_index``.

    This is the naive form: it materialises log_softmax, its exp and their product, three float32 copies of the
    [..., V] logits.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    plogp = torch.where(p == 0, torch.zeros_like(p), p * logp)  # 0 log 0 = 0; NaN stays NaN
    entropy = -plogp.sum(-1)
    valid = labels != ignore_index
    entropy = torch.where(valid, entropy, torch.zeros_like(entropy))
    return _gather_label_logp(logp, labels, ignore_index), entropy
