"""SylBoost segmentation throughput (frames/s): ours vs the official formulation, with identical output.

The baseline re-implements the official ``efficient_extraction`` formulation in plain torch: segment costs from an
``(S, N, D)`` stack of shifted feature copies, then one gather over an ``(S - min + 1, N)`` index table per segment
count, then the same binary-search rate control. Each runs in float32 (the official dtype: the baseline then computes
in float32, ours always accumulates costs in float64) and in float64, at 10 s and 30 s of audio; repeats are
interleaved after a warm-up, and the median and spread are reported. Borders are compared with each other and with
the float64 official formulation.

    PYTHONPATH=packages/shared/src:packages/syllablelm/src python packages/syllablelm/benchmarks/bench_segmentation.py \
        --out bench_segmentation.json
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from iclr25.shared import write_result
from iclr25.syllablelm.segment import _backtrack_np, _select_np, sylboost_segment

# the GPU check gives each benchmark ~25 s: this CPU benchmark then runs only the 10 s case, 3 repeats
GPU_ARGS = ["--seconds", "10", "--repeat", "3"]


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


def _interleaved(fns: dict, warmup: int, repeat: int) -> dict:
    """Warm each up, then time them in turn ``repeat`` times (A B A B ...), so load changes hit both alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return times


def _stats(ts: list[float]) -> dict:
    q1, med, q3 = np.percentile(ts, [25, 50, 75])
    return {"median_s": float(med), "iqr_s": float(q3 - q1), "min_s": min(ts), "max_s": max(ts), "repeat": len(ts)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, nargs="+", default=[10.0, 30.0])
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="bench_segmentation.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    figures = {}
    rng = np.random.default_rng(0)
    for sec in args.seconds:
        n = int(sec * 50)
        seg = np.searchsorted(np.sort(rng.choice(n, n // 8, replace=False)), np.arange(n))
        x64 = torch.tensor(rng.normal(size=(seg.max() + 1, args.dim))[seg] + 0.5 * rng.normal(size=(n, args.dim)))
        delta = 0.3
        reference = official_formulation(x64, delta)  # float64 official formulation: the exact reference
        for dt in args.dtypes:
            x = x64.to(getattr(torch, dt))
            ours = sylboost_segment(x, delta=delta).tolist()
            base = official_formulation(x, delta)
            times = _interleaved(
                {
                    "ours": lambda x=x, d=delta: sylboost_segment(x, delta=d),
                    "official": lambda x=x, d=delta: official_formulation(x, d),
                },
                args.warmup,
                args.repeat,
            )
            o, b = _stats(times["ours"]), _stats(times["official"])
            figures[f"{sec:g}s_{dt}"] = {
                "frames": n,
                "dtype": dt,
                "ours": o,
                "official": b,
                "ours_frames_per_s": n / o["median_s"],
                "official_frames_per_s": n / b["median_s"],
                "speedup": b["median_s"] / o["median_s"],
                "identical_borders": ours == base,
                "ours_equals_float64_reference": ours == reference,
                "official_equals_float64_reference": base == reference,
            }
            print(
                f"{sec:>5.0f} s audio ({n} frames, D={args.dim}, {dt}): ours {n / o['median_s']:8.0f} frames/s "
                f"(IQR {o['iqr_s'] * 1e3:.0f} ms), official formulation {n / b['median_s']:8.0f} frames/s "
                f"(IQR {b['iqr_s'] * 1e3:.0f} ms), speed-up {b['median_s'] / o['median_s']:4.1f}x, identical borders "
                f"{ours == base}, = float64 reference: ours {ours == reference}, official {base == reference}"
            )
    write_result(
        args.out,
        {
            "name": "syllablelm_segmentation",
            "params": {
                "dim": args.dim,
                "threads": torch.get_num_threads(),
                "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                "repeat": args.repeat,
                "warmup": args.warmup,
                "interleaved": True,
                "dtypes": args.dtypes,
            },
            "figures": figures,
        },
    )


if __name__ == "__main__":
    main()
