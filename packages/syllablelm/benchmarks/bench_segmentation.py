"""SylBoost segmentation throughput (frames/s): ours vs the official formulation, with identical output.

The baseline re-implements the official ``efficient_extraction`` formulation in plain torch: segment costs from an
``(S, N, D)`` stack of shifted feature copies, then one gather over an ``(S - min + 1, N)`` index table per segment
count, then the same binary-search rate control. Both run in float64 on CPU so the borders can be compared exactly.

    PYTHONPATH=packages/shared/src:packages/syllablelm/src python packages/syllablelm/benchmarks/bench_segmentation.py
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from iclr25.shared import benchmark, write_result
from iclr25.syllablelm.segment import _backtrack_np, _select_np, sylboost_segment


def official_formulation(
    x: torch.Tensor, delta: float, quantile: float = 0.75, s: int = 35, min_hop: int = 3, max_rate_hz: float = 10.0
) -> list[int]:
    n, d = x.shape
    s = min(s, n)
    m = int(n * max_rate_hz / 50.0)
    big = 16384.0
    # costs[k, e] for the segment of length k ending at frame e (exclusive), via shifted copies x[t - i]
    stacked = torch.stack([torch.roll(x, shifts=i, dims=0) for i in range(s)])  # [S, N, D]: stacked[i, t] = x[t-i]
    seg_sum = stacked.cumsum(0)  # sum of x[t-k+1..t] for k = i + 1
    seg_sq = stacked.pow(2).mean(-1).cumsum(0)
    k = torch.arange(1, s + 1, dtype=x.dtype)[:, None]
    cost = seg_sq - seg_sum.pow(2).mean(-1) / k  # [S, N]: segment [t-k+1, t]
    costs = torch.full((s + 1, n + 1), big, dtype=x.dtype)
    costs[1:, 1:] = cost
    t_idx = torch.arange(1, n + 1)
    costs[1:, 1:][(t_idx[None, :] - k.long()) < 0] = big  # wrapped-around windows
    # DP: one gather per segment count over an index table
    total = torch.full((n + 2,), big * 4, dtype=x.dtype)
    total[0] = 0.0
    back = np.zeros((m + 1, n + 1), dtype=np.int64)
    ks = torch.arange(min_hop, s + 1)
    src = t_idx[None, :] - ks[:, None]  # [K, N]
    src = torch.where(src >= 0, src, torch.full_like(src, n + 1))
    seg_costs = costs[min_hop:, 1:]
    for j in range(1, m + 1):
        cand = total[src] + seg_costs
        val, arg = cand.min(0)
        total[1 : n + 1] = val
        back[j, 1:] = (arg + min_hop).numpy()
    costs_np = costs.T.contiguous().numpy()  # [N + 1, S + 1] as (end, length)
    best = _select_np(costs_np, back, n, delta, quantile, max(m // 3, 1), m)
    return _backtrack_np(back, best, n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, nargs="+", default=[10.0, 30.0])
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--out", default="bench_segmentation.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    figures = {}
    rng = np.random.default_rng(0)
    for sec in args.seconds:
        n = int(sec * 50)
        seg = np.searchsorted(np.sort(rng.choice(n, n // 8, replace=False)), np.arange(n))
        x = torch.tensor(rng.normal(size=(seg.max() + 1, args.dim))[seg] + 0.5 * rng.normal(size=(n, args.dim)))
        delta = 0.3
        ours = sylboost_segment(x, delta=delta).tolist()
        base = official_formulation(x, delta)
        same = ours == base
        t_ours = benchmark(lambda x=x, delta=delta: sylboost_segment(x, delta=delta), warmup=1, repeat=3).median
        t_base = benchmark(lambda x=x, delta=delta: official_formulation(x, delta), warmup=1, repeat=3).median
        figures[f"{sec:g}s"] = {
            "frames": n,
            "ours_frames_per_s": n / t_ours,
            "official_frames_per_s": n / t_base,
            "speedup": t_base / t_ours,
            "identical_borders": same,
        }
        print(
            f"{sec:>5.0f} s audio ({n} frames, D={args.dim}): ours {n / t_ours:9.0f} frames/s, official formulation "
            f"{n / t_base:9.0f} frames/s, speed-up {t_base / t_ours:4.1f}x, identical borders: {same}"
        )
    write_result(
        args.out, {"name": "syllablelm_segmentation", "params": {"dim": args.dim, "threads": 1}, "figures": figures}
    )


if __name__ == "__main__":
    main()
