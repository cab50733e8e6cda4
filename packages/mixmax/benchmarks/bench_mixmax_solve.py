"""Cached MixMax weight solve vs the official per-step recompute loop (same data, same fitted group models).

The official scripts re-evaluate every group's KDE and conditional model on the risk rows at each of the 20
mirror-ascent steps; MixMax evaluates them once (they do not depend on lambda). Both paths start from the same
fitted models and must return the same lambda; the ratio of wall times is the speed-up of caching.

    python packages/mixmax/benchmarks/bench_mixmax_solve.py [--n-train 6000] [--steps 20] [--out FILE]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from xgboost import XGBClassifier

from iclr25.mixmax import MixMax, RiskCache
from iclr25.mixmax.official import recompute_solve
from iclr25.shared import write_result


def _data(n_train: int, seed: int):
    try:
        from iclr25.mixmax.data import load_adult

        d = load_adult("train", group="race")
        name = "adult-race"
    except FileNotFoundError:
        from iclr25.mixmax.data import make_gaussian_groups

        d = make_gaussian_groups().sample(n_train // 3 + 1, seed=seed)
        name = "gaussian-groups"
    idx = np.sort(np.random.default_rng(seed).choice(len(d), min(n_train, len(d)), replace=False))
    return d.subset(idx), name


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-train", type=int, default=6000)
    p.add_argument("--steps", type=int, default=20, help="mirror-ascent steps (official: 20)")
    p.add_argument("--cross-fit", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_mixmax_solve.json"))
    a = p.parse_args(argv)
    d, data_name = _data(a.n_train, a.seed)
    est = XGBClassifier(n_estimators=50, max_depth=4, learning_rate=0.1, random_state=a.seed)
    mm = MixMax(est, density="kde", cross_fit=a.cross_fit, step_size=0.1, max_steps=a.steps, tol=None)
    t0 = time.perf_counter()
    mm.build_cache(d.X, d.y, d.groups)  # fits the group models (shared by both paths)
    t_fit = time.perf_counter() - t0
    X, y, _, codes, _ = mm._prepare(d.X, d.y, d.groups)

    t0 = time.perf_counter()  # cached: evaluate the models once, then every step is O(N G)
    parts = [(rows, *mm.evaluate_group_models(c, k, X[rows], y[rows])) for c, k, rows in mm.fold_models_]
    rows = np.concatenate([q[0] for q in parts])
    cache = RiskCache(
        codes[rows],
        np.concatenate([q[1] for q in parts]),
        np.concatenate([q[2] for q in parts]),
        mm.n_groups_,
        "ce",
        eps=mm.eps,
    )
    lam_cached = mm.solve(cache).weights
    t_cached = time.perf_counter() - t0

    t0 = time.perf_counter()  # official: re-evaluate every group's density and model at every step
    lam_recompute = recompute_solve(mm, mm.fold_models_, X, y, codes)
    t_recompute = time.perf_counter() - t0

    max_diff = float(np.abs(lam_cached - lam_recompute).max())
    if max_diff > 1e-10:
        raise AssertionError(f"cached and recomputed solves disagree by {max_diff}")
    record = {
        "name": "mixmax_cached_solve_vs_recompute",
        "params": {
            "data": data_name,
            "n_train": len(d),
            "groups": int(mm.n_groups_),
            "steps": a.steps,
            "cross_fit": a.cross_fit,
            "group_model": "XGBClassifier(n_estimators=50, max_depth=4)",
            "density": "GroupKDE(scott, standardized)",
        },
        "figures": {
            "fit_group_models_s": t_fit,
            "cached_solve_s": t_cached,
            "recompute_solve_s": t_recompute,
            "speedup_solve": t_recompute / t_cached,
            "speedup_end_to_end": (t_fit + t_recompute) / (t_fit + t_cached),
            "max_abs_lambda_diff": max_diff,
            "weights": lam_cached.tolist(),
        },
    }
    write_result(a.out, record)
    print(
        f"{data_name}, {len(d)} rows, {mm.n_groups_} groups, {a.steps} steps: fit {t_fit:.1f}s; "
        f"cached solve {t_cached:.2f}s vs per-step recompute {t_recompute:.1f}s -> {t_recompute / t_cached:.1f}x "
        f"(end to end incl. fits {record['figures']['speedup_end_to_end']:.2f}x); same lambda (diff {max_diff:.1e})"
    )
    return record


if __name__ == "__main__":
    main()
