"""Sliding-window perplexity against brute force, disjointness, and the PPL-vs-sparsity curve of the small model."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from iclr25.teal import SparsityPlan, apply_teal, calibrate, check_disjoint, sliding_window_ppl
from iclr25.teal.data.text import chunk_ids
from iclr25.teal.evaluation import windows


def _official_windows(n, context, window):
    """Independent transcription of the official loop: windows of context + window tokens, stride window; only the
    positions after the first ``context`` of each window are scored. Yields (input_start, score_start, end)."""
    for start in range(0, n, window):
        end = min(start + context + window, n)
        if end - start <= context:
            break
        yield start, start + context, end


def test_windows_follow_the_official_protocol():
    for n, c, w in [(10, 4, 3), (3000, 2048, 512), (2560, 2048, 512), (513, 16, 64), (2, 1, 1), (50, 1, 100)]:
        assert windows(n, c, w) == list(_official_windows(n, c, w))
        scored = [j for _, s, e in windows(n, c, w) for j in range(s, e)]
        assert scored == list(range(c, n))  # the first `context` tokens are never scored, the rest exactly once
        assert all(s - a == c for a, s, _ in windows(n, c, w))  # every window sees exactly `context` tokens before
    assert windows(2560, 2048, 512) == [(0, 2048, 2560)]  # official: one 2,560-token window, its last 512 scored


def test_sliding_window_ppl_equals_token_by_token_brute_force(tiny_llama):
    ids = torch.randint(0, 64, (37,), generator=torch.Generator().manual_seed(0))
    context, window = 8, 5
    nll, count = 0.0, 0
    with torch.no_grad():
        for a, s, e in _official_windows(ids.numel(), context, window):
            for j in range(s, e):  # token j predicted from ids[a:j] only
                logits = tiny_llama(input_ids=ids[None, a:j]).logits[0, -1]
                nll -= float(F.log_softmax(logits.double(), -1)[ids[j]])
                count += 1
    assert count == ids.numel() - context
    expected = math.exp(nll / count)
    got = sliding_window_ppl(tiny_llama, ids, context=context, window=window, batch_size=3)
    assert got.tokens == count
    assert got.ppl == pytest.approx(expected, rel=1e-5)


def test_one_window_equals_transformers_loss(tiny_llama):
    ids = torch.randint(0, 64, (50,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        loss = tiny_llama(input_ids=ids[None], labels=ids[None]).loss  # scores tokens 1..49
    got = sliding_window_ppl(tiny_llama, ids, context=1, window=100)
    assert got.tokens == 49
    assert got.ppl == pytest.approx(math.exp(float(loss)), rel=1e-5)


def test_check_disjoint():
    a = torch.arange(200)
    check_disjoint(a[:100], a[100:], ngram=16)
    with pytest.raises(ValueError, match="overlaps"):
        check_disjoint(a[:120], a[90:], ngram=16)


def test_bad_eval_input(tiny_llama):
    ids = torch.zeros(20, dtype=torch.long)
    with pytest.raises(ValueError, match="1-D LongTensor"):
        sliding_window_ppl(tiny_llama, torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="context must be >= 1"):
        sliding_window_ppl(tiny_llama, ids, context=0, window=4)
    with pytest.raises(ValueError, match="window must be >= 1"):
        sliding_window_ppl(tiny_llama, ids, context=4, window=0)
    with pytest.raises(TypeError, match="context must be an int"):
        sliding_window_ppl(tiny_llama, ids, context=4.0, window=4)
    with pytest.raises(ValueError, match="need more than context=20 tokens"):
        sliding_window_ppl(tiny_llama, ids, context=20, window=4)
    bad = ids.clone()
    bad[7] = 64  # vocab_size = 64
    with pytest.raises(ValueError, match=r"token ids in \[0, 64\] but the model's vocabulary is \[0, 64\)"):
        sliding_window_ppl(tiny_llama, bad, context=4, window=4)
    with pytest.raises(ValueError, match="batch_size"):
        sliding_window_ppl(tiny_llama, ids, context=4, window=4, batch_size=0)


def test_shipped_calibration_and_evaluation_texts_are_disjoint(small_texts):
    calib, evaluation = small_texts
    check_disjoint(calib, evaluation, ngram=64)


@pytest.mark.integration
def test_ppl_non_decreasing_in_uniform_sparsity_on_the_small_model(small_model, small_texts):
    calib_ids, eval_ids = small_texts
    calib = calibrate(small_model, chunk_ids(calib_ids[:4096], 128, 16))
    ids = eval_ids[:2048]
    ppl = {}
    for s in (0.0, 0.25, 0.5, 0.7):
        with apply_teal(small_model, calib, SparsityPlan.uniform(s), backend="reference"):
            ppl[s] = sliding_window_ppl(small_model, ids, context=64, window=64, batch_size=64).ppl
    dense = sliding_window_ppl(small_model, ids, context=64, window=64, batch_size=64).ppl
    assert ppl[0.0] == dense  # sparsity 0 is exactly the dense model
    # 25 % is within noise of dense (it may even be a hair lower); beyond that PPL rises with s
    assert ppl[0.25] >= dense * (1 - 1e-3)
    assert ppl[0.25] < ppl[0.5] < ppl[0.7]
    assert ppl[0.25] / dense < 1.05 and ppl[0.7] / dense > 1.05  # mild at 25 %, visible at 70 %
