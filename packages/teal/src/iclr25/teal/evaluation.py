"""Sliding-window perplexity (official utils/eval_ppl.py protocol, configurable).

Protocol: windows of ``context + window`` tokens advancing by ``window`` (official: 2,048 + 512, stride 512); each
window scores only its last ``window`` tokens, each predicted from exactly the ``context`` tokens before its window's
scored part (the last window may be shorter). The first ``context`` tokens of the stream are never scored; every
later token is scored exactly once. PPL = exp(mean token NLL) (the official code averages window NLLs, which is the
same for equal windows).
Calibration and evaluation text must be disjoint: :func:`check_disjoint` refuses overlapping token streams.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.shared import progress

from .config import EvalConfig
from .modules import check_token_ids


@dataclass(frozen=True)
class PerplexityResult:
    ppl: float
    nll: float  # mean negative log-likelihood per scored token (nats)
    tokens: int  # scored tokens


def windows(n_tokens: int, context: int, window: int) -> list[tuple[int, int, int]]:
    """(input_start, score_start, end) per window: tokens [score_start, end) are scored, inputs start at input_start.

    Scoring starts at token ``context`` (the first ``context`` tokens are context only, never scored).
    """
    for name, v in (("context", context), ("window", window)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if context < 1:
        raise ValueError(
            f"context must be >= 1 (the first token has nothing to be predicted from), got {context}; "
            "the official protocol uses context=2048"
        )
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if n_tokens <= context:
        raise ValueError(f"need more than context={context} tokens to score any, got {n_tokens}")
    out = []
    for score_start in range(context, n_tokens, window):
        end = min(score_start + window, n_tokens)
        out.append((max(0, score_start - context), score_start, end))
    return out


@torch.no_grad()
def sliding_window_ppl(
    model: nn.Module,
    ids: torch.Tensor,
    *,
    context: int = EvalConfig.context,
    window: int = EvalConfig.window,
    batch_size: int = 8,
) -> PerplexityResult:
    """Perplexity of a causal LM on a 1-D token stream ``ids`` with the sliding-window protocol."""
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long:
        raise ValueError(f"ids must be a 1-D LongTensor, got {getattr(ids, 'shape', type(ids))}")
    check_token_ids(model, ids, "ids")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    device = next(model.parameters()).device
    groups: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
    for w in windows(ids.numel(), context, window):
        groups[(w[2] - w[0], w[2] - w[1])].append(w)  # same (input length, scored count) -> one batch
    total_nll, total_tok = 0.0, 0
    chunks = [(shape, ws[i : i + batch_size]) for shape, ws in groups.items() for i in range(0, len(ws), batch_size)]
    for (length, scored), ws in progress(chunks, desc="ppl"):
        inp = torch.stack([ids[a:e] for a, _, e in ws]).to(device)
        logits = model(input_ids=inp, use_cache=False).logits
        # the logit at position j predicts token j + 1; score the last `scored` tokens of each window
        pred = logits[:, length - scored - 1 : length - 1].float()
        target = inp[:, length - scored :]
        nll = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), target.reshape(-1), reduction="sum")
        total_nll += float(nll)
        total_tok += target.numel()
    mean = total_nll / total_tok
    return PerplexityResult(ppl=math.exp(mean), nll=mean, tokens=total_tok)


def check_disjoint(calibration_ids: torch.Tensor, evaluation_ids: torch.Tensor, ngram: int = 64) -> None:
    """Raise ``ValueError`` if an ``ngram``-token span of the evaluation stream also occurs in the calibration stream."""
    a, b = calibration_ids.reshape(-1).tolist(), evaluation_ids.reshape(-1).tolist()
    if len(a) < ngram or len(b) < ngram:
        return
    seen = {tuple(a[i : i + ngram]) for i in range(0, len(a) - ngram + 1)}
    for i in range(0, len(b) - ngram + 1, max(1, ngram // 4)):
        if tuple(b[i : i + ngram]) in seen:
            raise ValueError(f"evaluation text overlaps the calibration text (a {ngram}-token span at position {i})")
