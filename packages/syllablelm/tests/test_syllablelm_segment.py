"""Segmentation oracles: DP optimum == brute-force enumeration, planted segments, bounds, rate control."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.syllablelm.kernels import segmental_dp
from iclr25.syllablelm.segment import (
    backtrack,
    mincut_segment,
    ncut_costs,
    optimal_segmentation,
    segment_costs_of,
    select_num_segments,
    sse_costs,
    sylboost_segment,
)


def compositions(n, lo, hi, max_parts=None):
    """All ordered segment-length tuples summing to n with lengths in [lo, hi]."""
    if n == 0:
        yield ()
        return
    if max_parts == 0:
        return
    for k in range(lo, min(hi, n) + 1):
        for rest in compositions(n - k, lo, hi, None if max_parts is None else max_parts - 1):
            yield (k,) + rest


def sse_of(x, lengths):
    total, a = 0.0, 0
    for k in lengths:
        seg = x[a : a + k]
        total += float(((seg - seg.mean(0)) ** 2).sum()) / x.shape[1]
        a += k
    return total


def ncut_of(aff, lengths, eps=1e-5):
    total, a = 0.0, 0
    for k in lengths:
        s = slice(a, a + k)
        inside = float(aff[s, s].sum())
        cut = float(aff[s, :].sum() + aff[:, s].sum()) - 2 * inside
        total += cut / (cut + inside + eps)
        a += k
    return total


@pytest.mark.parametrize("n", [6, 9, 11, 13])
@pytest.mark.parametrize("exact", [True, False])
def test_sse_dp_matches_brute_force(n, exact):
    rng = np.random.default_rng(n)
    x = torch.tensor(rng.normal(size=(n, 3)))
    lo, hi = 2, 5
    costs = sse_costs(x, max_len=hi, min_len=lo)
    jmax = n // lo
    total, back = segmental_dp(costs, jmax, exact=exact)
    for j in range(1, jmax + 1):
        cands = [c for c in compositions(n, lo, hi) if (len(c) == j if exact else len(c) <= j)]
        if not cands:
            assert not torch.isfinite(total[0, j, n])
            continue
        brute = min(sse_of(x.numpy(), c) for c in cands)
        assert float(total[0, j, n]) == pytest.approx(brute, abs=1e-9)
        borders = backtrack(back[0], j, n)
        assert sum(segment_costs_of(costs[0], borders).tolist()) == pytest.approx(brute, abs=1e-9)
        if exact:
            assert len(borders) - 1 == j


@pytest.mark.parametrize("n", [5, 8, 12])
@pytest.mark.parametrize("exact", [True, False])
def test_ncut_dp_matches_brute_force(n, exact):
    rng = np.random.default_rng(100 + n)
    a = torch.tensor(rng.random((n, n)))
    lo, hi = 1, 4
    costs = ncut_costs(a, max_len=hi, min_len=lo)
    total, back = segmental_dp(costs, n, exact=exact)
    for j in range(1, n + 1):
        cands = [c for c in compositions(n, lo, hi) if (len(c) == j if exact else len(c) <= j)]
        if not cands:
            continue
        brute = min(ncut_of(a.numpy(), c) for c in cands)
        assert float(total[0, j, n]) == pytest.approx(brute, abs=1e-9)


def test_sse_toy_exact():
    x = torch.tensor([0, 0, 0, 5, 5, 5, 5, 1, 1, 1.0]).view(-1, 1)
    assert optimal_segmentation(x, 3).tolist() == [0, 3, 7, 10]
    costs = sse_costs(x, max_len=35, min_len=3)
    total, back = segmental_dp(costs, 3, exact=False)
    assert backtrack(back[0], 3, 10).tolist() == [0, 3, 7, 10]
    assert float(total[0, 3, 10]) == 0.0


def test_ncut_block_diagonal():
    a = torch.block_diag(torch.ones(4, 4), torch.ones(5, 5), torch.ones(3, 3))
    assert mincut_segment(a, 3).tolist() == [0, 4, 9, 12]


def test_planted_segments_recovered():
    rng = np.random.default_rng(0)
    lengths = [7, 12, 5, 20, 9, 14]
    means = rng.normal(size=(len(lengths), 16)) * 2
    x = torch.tensor(np.concatenate([np.repeat(m[None], k, 0) for m, k in zip(means, lengths)]))
    x = x + 0.05 * torch.randn(x.shape, dtype=x.dtype)
    expect = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    assert optimal_segmentation(x, len(lengths)).tolist() == expect
    aff = (torch.cdist(x, x) < 1.0).double()  # same-segment affinity
    assert mincut_segment(aff, len(lengths), max_len=25).tolist() == expect


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 10, 14, 40, 111])
def test_lengths_within_bounds_and_short_inputs(n):
    x = torch.randn(n, 8) if n else torch.zeros(0, 8)
    for b in [sylboost_segment(x), optimal_segmentation(x, 4) if n else torch.tensor([0, 0])]:
        assert b[0] == 0 and b[-1] == n
        d = torch.diff(b)
        if n >= 3:
            assert (d >= 3).all() and (d <= 35).all()
        else:
            assert len(b) == 2
    # constant features, N=10: the official code returns a zero-length segment here
    b = sylboost_segment(torch.zeros(10, 4))
    assert (torch.diff(b) > 0).all()


def test_batched_with_padding_equals_single():
    torch.manual_seed(1)
    a, b = torch.randn(60, 8), torch.randn(45, 8)
    batch = torch.zeros(2, 60, 8)
    batch[0], batch[1, :45] = a, b
    out = sylboost_segment(batch, delta=0.3, lengths=[60, 45])
    assert out[0].tolist() == sylboost_segment(a, delta=0.3).tolist()
    assert out[1].tolist() == sylboost_segment(b, delta=0.3).tolist()


def _official_rate_control(costs, back, n, m, delta, quantile):
    """Independent transcription of the binary search (per-frame segment cost quantile vs delta)."""
    lo, hi, best = m // 3, m, m // 3
    while lo <= hi:
        mid = (lo + hi) // 2
        q, j, segs = n, mid, []
        while q > 0:
            k = int(back[j, q])
            segs.append(float(costs[q, k]) / k)
            q, j = q - k, j - 1
        if np.quantile(segs, quantile) > delta:
            lo, best = mid + 1, mid
        else:
            hi = mid - 1
    return best


@pytest.mark.parametrize("seed", range(6))
def test_rate_control_matches_transcription(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 90))
    bounds = np.sort(rng.choice(np.arange(4, n - 4), size=n // 10, replace=False))
    seg_id = np.searchsorted(bounds, np.arange(n), side="right")
    x = torch.tensor(rng.normal(size=(seg_id.max() + 1, 16))[seg_id] + 0.3 * rng.normal(size=(n, 16)))
    m = int(n * 10 / 50)
    costs = sse_costs(x, 35, 3)[0]
    _, back = segmental_dp(costs[None], m, exact=False)
    for delta in (0.05, 0.2, 0.5):
        best = _official_rate_control(costs, back[0], n, m, delta, 0.75)
        assert select_num_segments(costs, back[0], n, delta, 0.75, max_segments=m) == best
        assert sylboost_segment(x, delta=delta).tolist() == backtrack(back[0], best, n).tolist()


def test_features_requiring_grad_are_accepted():
    x = torch.randn(40, 4, requires_grad=True)
    assert sylboost_segment(x, delta=0.1)[-1] == 40
    assert optimal_segmentation(x, 4)[-1] == 40
    assert mincut_segment(torch.rand(12, 12, requires_grad=True), 3)[-1] == 12


def test_bad_input():
    with pytest.raises(TypeError):
        optimal_segmentation([[1.0]], 2)
    with pytest.raises(ValueError):
        optimal_segmentation(torch.randn(10, 2), 0)
    with pytest.raises(ValueError):
        sylboost_segment(torch.randn(10, 2), rate="7hz")
    with pytest.raises(ValueError):
        sylboost_segment(torch.randn(2, 10, 2), lengths=[3, 11])
