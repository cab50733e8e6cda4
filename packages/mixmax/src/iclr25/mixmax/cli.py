"""Command line: ``python -m iclr25.mixmax demo | study | fit --csv FILE ...``."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time

import numpy as np

from ._validation import encode_groups
from .config import XGBDefaults
from .estimators import MixMax

__all__ = ["main", "run_experiment", "format_result"]


def _xgb(n_estimators: int, max_depth: int, seed: int, n_jobs: int | None = None):
    from xgboost import XGBClassifier

    return XGBClassifier(
        n_estimators=n_estimators,
        max_depth=max_depth,
        learning_rate=XGBDefaults.learning_rate,
        random_state=seed,
        n_jobs=n_jobs,
    )


def run_experiment(
    seeds, settings=None, split: str = "test", arms: str = "demo", fairlearn: bool = True, jtt: bool = True, log=print
) -> dict:
    """Run the multi-seed Adult experiment: ``arms="demo"`` (ERM, balancing, MixMax, fairlearn, JTT) or "study"
    (MixMax variants for choosing the defaults; use ``split="val"``). Returns summary rows, the paired bootstrap of
    MixMax (defaults) - balancing (demo) and the raw per-seed results."""
    from . import experiments as ex

    settings = settings or ex.DemoSettings()
    arm_fns = ex.demo_arms(settings, fairlearn, jtt) if arms == "demo" else ex.study_arms(settings)
    log(
        f"Adult ({settings.group} groups), {len(seeds)} seeds {list(seeds)}: {settings.n_train} training rows per "
        f"seed, evaluated on {'adult.test' if split == 'test' else 'the remaining adult.data rows'}; XGBoost "
        f"n_estimators={settings.n_estimators}, max_depth={settings.max_depth} for every arm"
    )
    t0 = time.perf_counter()
    import warnings

    from .estimators import SeparableGroupsWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SeparableGroupsWarning)
        runs = [ex.run_seed(s, settings, arm_fns, split, log) for s in seeds]
    rows = ex.summarise(runs)
    out = {
        "rows": rows,
        "groups": runs[0]["labels"],
        "seeds": list(seeds),
        "split": split,
        "settings": dict(settings.__dict__),
        "seconds": time.perf_counter() - t0,
        "warnings": sorted({str(w.message) for w in caught}),
        "per_seed": [
            {
                "seed": r["seed"],
                "arms": {k: {m: v[m] for m in ("worst_acc", "worst_logloss", "avg_acc")} for k, v in r["arms"].items()},
                "info": r["info"],
            }
            for r in runs
        ],
    }
    names = [r["method"] for r in rows]
    if "Group balancing" in names:
        out["bootstrap"] = {
            a: ex.paired_bootstrap(runs, a, "Group balancing")
            for a in names
            if a.startswith(("MixMax", "cross", "in-"))
        }
    return out


def format_result(result: dict) -> str:
    from .experiments import format_summary

    lines = [format_summary(result["rows"], result["groups"])]
    if result.get("bootstrap"):
        lines.append("")
        lines.append("paired bootstrap, arm - Group balancing (seeds and evaluation rows resampled; 95% interval):")
        for name, b in result["bootstrap"].items():
            a, ll = b["acc"], b["logloss"]
            lines.append(
                f"  {name:<48} worst-group acc {a[0]:+.4f} [{a[1]:+.4f}, {a[2]:+.4f}]   "
                f"worst-group log-loss {ll[0]:+.4f} [{ll[1]:+.4f}, {ll[2]:+.4f}]"
            )
    shown: dict[str, int] = {}  # warnings that differ only in their numbers are printed once, with a count
    for w in result.get("warnings", []):
        key = re.sub(r"[0-9.]+", "#", w)
        if key in shown:
            shown[key] += 1
            continue
        shown[key] = 1
        lines.append(f"warning seen: {w}")
    repeats = sum(n - 1 for n in shown.values())
    if repeats:
        lines.append(f"({repeats} more warnings of the same kinds, with other numbers, from other seeds or arms)")
    return "\n".join(lines)


def _read_csv(path: str, target: str, group: str, features: list[str] | None):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        names = reader.fieldnames or []
        rows = list(reader)
    for col in [target, group] + (features or []):
        if col not in names:
            raise ValueError(f"column {col!r} not in {path} (columns: {names})")
    if not rows:
        raise ValueError(f"{path} has no data rows")
    feats = features or [c for c in names if c not in (target, group)]
    X = np.empty((len(rows), len(feats)))
    for i, r in enumerate(rows):
        missing = [c for c in [target, group] + feats if r.get(c) is None or r[c].strip() == ""]
        if missing:
            raise ValueError(f"{path}, line {i + 2}: missing value in column(s) {missing}")
    for j, c in enumerate(feats):
        vals = [r[c] for r in rows]
        try:
            X[:, j] = np.array(vals, dtype=np.float64)
        except ValueError:  # categorical: integer codes
            _, X[:, j] = np.unique(np.array(vals), return_inverse=True)
        if not np.all(np.isfinite(X[:, j])):
            i = int(np.flatnonzero(~np.isfinite(X[:, j]))[0])
            raise ValueError(f"{path}, line {i + 2}, column {c!r}: value {vals[i]!r} is not finite")
    return X, np.array([r[target] for r in rows]), np.array([r[group] for r in rows]), feats


def _fit_command(a) -> int:
    from iclr25.shared import atomic_write

    X, y, g, feats = _read_csv(a.csv, a.target, a.group, a.features.split(",") if a.features else None)
    encode_groups(g)
    kw = {} if a.entropy is None else {"entropy": a.entropy}
    mm = MixMax(
        _xgb(a.n_estimators, a.max_depth, a.seed, a.n_jobs),
        density=a.density,
        cross_fit=a.cross_fit if a.cross_fit >= 2 else None,
        step_size=a.step_size,
        max_steps=a.max_steps,
        tol=a.tol,
        random_state=a.seed,
        verbose=True,
        **kw,
    )
    mm.fit_weights(X, y, g)
    out = {
        "groups": [str(v) for v in mm.groups_],
        "weights": mm.weights_.tolist(),
        "group_risks": mm.group_risks_.tolist(),
        "value": mm.value_,
        "gap": mm.gap_,
        "n_steps": mm.n_steps_,
        "converged": bool(mm.converged_),
        "features": feats,
    }
    print(f"MixMax weights on {a.csv} ({len(X)} rows, {len(feats)} features):")
    for name, w, r in zip(out["groups"], out["weights"], out["group_risks"]):
        print(f"  {name:<30} lambda={w:.4f}  risk={r:.4f}")
    print(f"  objective {mm.value_:.5f}, duality gap {mm.gap_:.2e} after {mm.n_steps_} steps")
    if a.out:
        with atomic_write(a.out, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {a.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iclr25.mixmax", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="ERM, balancing, MixMax, fairlearn and JTT with XGBoost on UCI Adult, 5 seeds")
    d.add_argument("--seeds", type=int, default=5, help="number of seeds (subsample and model seeds 0..S-1)")
    d.add_argument("--n-train", type=int, default=None, help="training rows per seed (default 6000; --long 16000)")
    d.add_argument("--long", action="store_true", help="10 seeds, 16000 rows, official XGBoost 200 trees depth 8")
    d.add_argument("--no-fairlearn", action="store_true")
    d.add_argument("--no-jtt", action="store_true")
    d.add_argument("--group", choices=["race", "sex"], default="race")
    d.add_argument("--png", default=None, help="write the worst-group accuracy chart (PNG) here")
    d.add_argument("--json", default=None, help="also write the results as JSON here")
    st = sub.add_parser("study", help="the robust-defaults study: MixMax variants on a validation split, S seeds")
    st.add_argument("--seeds", type=int, default=5)
    st.add_argument("--n-train", type=int, default=None)
    st.add_argument("--json", default=None)
    f = sub.add_parser("fit", help="MixMax weights for your own CSV table")
    f.add_argument("--csv", required=True)
    f.add_argument("--target", required=True)
    f.add_argument("--group", required=True)
    f.add_argument("--features", default=None, help="comma-separated feature columns (default: all others)")
    f.add_argument("--density", choices=["kde", "classifier"], default="kde")
    f.add_argument("--cross-fit", type=int, default=0, help="folds; 0 = in-sample risks (official and default)")
    f.add_argument("--step-size", type=float, default=1.0)
    f.add_argument("--max-steps", type=int, default=2000)
    f.add_argument("--tol", type=float, default=1e-4)
    f.add_argument("--entropy", type=float, default=None, help="entropy regularisation tau (default: MixMax's)")
    f.add_argument("--n-estimators", type=int, default=XGBDefaults.n_estimators)
    f.add_argument("--max-depth", type=int, default=XGBDefaults.max_depth)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--n-jobs", type=int, default=None, help="XGBoost threads (default: XGBoost's, all cores)")
    f.add_argument("--out", default=None, help="write the weights as JSON here")
    a = p.parse_args(argv)
    if a.cmd in ("demo", "study"):
        from .experiments import DemoSettings, plot_worst_group

        if a.cmd == "demo" and a.long:
            settings = DemoSettings(n_train=a.n_train or 16000, n_estimators=200, max_depth=8, group=a.group)
            seeds = range(max(a.seeds, 10))
        else:
            kw = {"group": a.group} if a.cmd == "demo" else {}
            settings = DemoSettings(n_train=a.n_train or DemoSettings.n_train, **kw)
            seeds = range(a.seeds)
        if a.cmd == "demo":
            res = run_experiment(seeds, settings, "test", "demo", not a.no_fairlearn, not a.no_jtt)
        else:
            res = run_experiment(seeds, settings, "val", "study")
        print()
        print(format_result(res))
        print(f"\ntotal {res['seconds']:.0f}s")
        if a.cmd == "demo" and a.png:
            plot_worst_group(
                res["rows"], a.png, f"Adult ({settings.group}), {len(res['seeds'])} seeds, {settings.n_train} rows"
            )
            print(f"wrote {a.png}")
        if a.json:
            from iclr25.shared import atomic_write

            with atomic_write(a.json, "w") as fh:
                json.dump(res, fh, indent=2, default=float)
            print(f"wrote {a.json}")
        return 0
    try:
        return _fit_command(a)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
