"""Sliding-window perplexity against brute force, disjointness, and the PPL-vs-sparsity curve of the small model."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from iclr25.teal import SparsityPlan, apply_teal, calibrate, check_disjoint, sliding_window_ppl
from iclr25.teal.data.text import chunk_ids
from iclr25.teal.evaluation import windows


def test_windows_score_every_token_once():
    for n, c, w in [(10, 4, 3), (100, 2048, 512), (513, 16, 64), (2, 0, 1)]:
        scored = [j for _, s, e in windows(n, c, w) for j in range(s, e)]
        assert scored == list(range(1, n))
        assert all(s - a <= c and a >= 0 for a, s, _ in windows(n, c, w))


def test_sliding_window_ppl_equals_token_by_token_brute_force(tiny_llama):
    ids = torch.randint(0, 64, (37,), generator=torch.Generator().manual_seed(0))
    context, window = 8, 5
    nll = 0.0
    with torch.no_grad():
        for a, s, e in windows(ids.numel(), context, window):
            for j in range(s, e):  # token j predicted from ids[a:j] only
                logits = tiny_llama(input_ids=ids[None, a:j]).logits[0, -1]
                nll -= float(F.log_softmax(logits.double(), -1)[ids[j]])
    expected = math.exp(nll / (ids.numel() - 1))
    got = sliding_window_ppl(tiny_llama, ids, context=context, window=window, batch_size=3)
    assert got.tokens == ids.numel() - 1
    assert got.ppl == pytest.approx(expected, rel=1e-5)


def test_one_window_equals_transformers_loss(tiny_llama):
    ids = torch.randint(0, 64, (50,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        loss = tiny_llama(input_ids=ids[None], labels=ids[None]).loss
    got = sliding_window_ppl(tiny_llama, ids, context=100, window=100)
    assert got.ppl == pytest.approx(math.exp(float(loss)), rel=1e-5)


def test_check_disjoint():
    a = torch.arange(200)
    check_disjoint(a[:100], a[100:], ngram=16)
    with pytest.raises(ValueError, match="overlaps"):
        check_disjoint(a[:120], a[90:], ngram=16)


def test_bad_eval_input(tiny_llama):
    with pytest.raises(ValueError, match="1-D LongTensor"):
        sliding_window_ppl(tiny_llama, torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        sliding_window_ppl(tiny_llama, torch.zeros(1, dtype=torch.long))


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
    assert ppl[0.0] <= ppl[0.25] <= ppl[0.5] <= ppl[0.7]
    assert ppl[0.25] / dense < 1.05 and ppl[0.7] / dense > 1.05  # mild at 25 %, visible at 70 %
