"""Command line: ``python -m iclr25.mixmax demo`` and ``python -m iclr25.mixmax fit --csv FILE ...``."""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time

import numpy as np

from ._validation import encode_groups
from .config import XGBDefaults
from .estimators import MixMax, balanced_sample_weight, group_sample_weight
from .metrics import group_accuracy, group_log_loss

__all__ = ["main", "run_demo", "format_table"]


def _xgb(n_estimators: int, max_depth: int, seed: int):
    from xgboost import XGBClassifier

    return XGBClassifier(
        n_estimators=n_estimators, max_depth=max_depth, learning_rate=XGBDefaults.learning_rate, random_state=seed
    )


def _evaluate(model, X, y, groups) -> dict:
    proba = np.asarray(model.predict_proba(X))
    acc = group_accuracy(y, proba.argmax(axis=1), groups)
    ll = group_log_loss(y, proba, groups)
    return {
        "worst_acc": min(acc.values()),
        "worst_logloss": max(ll.values()),
        "avg_acc": float(np.mean(proba.argmax(axis=1) == y)),
        "group_acc": acc,
        "group_logloss": ll,
    }


def run_demo(
    n_train: int = 16000,
    seed: int = 0,
    n_estimators: int = XGBDefaults.n_estimators,
    max_depth: int = XGBDefaults.max_depth,
    group: str = "race",
    log=print,
) -> dict:
    """ERM vs group balancing vs MixMax with XGBoost on UCI Adult (train subsample -> the full Adult test split)."""
    from .data import load_adult

    t0 = time.perf_counter()
    tr, te = load_adult("train", group=group), load_adult("test", group=group)
    if n_train < len(tr):
        tr = tr.subset(np.sort(np.random.default_rng(seed).choice(len(tr), n_train, replace=False)))
    labels = np.unique(tr.groups)
    log(
        f"Adult ({group} groups): {len(tr)} training rows (subsample of 32,561), {len(te)} test rows; "
        f"XGBoost n_estimators={n_estimators}, max_depth={max_depth}"
    )
    est = _xgb(n_estimators, max_depth, seed)
    counts = np.array([tr.group_counts()[g] for g in labels], dtype=np.float64)
    rows = []

    def add(name, model, weights, extra=None):
        r = {"method": name, "weights": dict(zip(labels.tolist(), np.round(weights, 4).tolist()))}
        r.update(_evaluate(model, te.X, te.y, te.groups))
        r.update(extra or {})
        rows.append(r)
        log(f"  {name}: done at {time.perf_counter() - t0:.0f}s")

    from sklearn.base import clone

    add("ERM", clone(est).fit(tr.X, tr.y), counts / counts.sum())
    add(
        "Group balancing",
        clone(est).fit(tr.X, tr.y, sample_weight=balanced_sample_weight(tr.groups)),
        np.full(len(labels), 1.0 / len(labels)),
    )

    def add_mixmax(name, mm, res):
        w = group_sample_weight(tr.groups, res.weights, mm.groups_)
        add(
            name,
            clone(est).fit(tr.X, tr.y, sample_weight=w),
            res.weights,
            {
                "gap": res.gap,
                "n_steps": res.n_steps,
                "converged": bool(res.converged),
                "risks": dict(zip(labels.tolist(), np.round(res.group_risks, 4).tolist())),
            },
        )

    # in-sample risks (official data reuse, raw-feature KDE): one cache, two solvers
    official = MixMax.official(est, random_state=seed).fit_weights(tr.X, tr.y, tr.groups)
    add_mixmax("MixMax official preset (in-sample, 20 x eta=0.1)", official, official.solve_)
    converged = MixMax.official(est, step_size=1.0, max_steps=2000, tol=1e-4)
    add_mixmax("MixMax in-sample, to gap 1e-4", official, converged.solve(official.cache_))
    # ours: 2-fold cross-fitted risks, standardised KDE, run to the duality gap
    cf = MixMax(est, density="kde", cross_fit=2, random_state=seed).fit_weights(tr.X, tr.y, tr.groups)
    add_mixmax("MixMax 2-fold cross-fit, to gap 1e-4", cf, cf.solve_)
    return {
        "rows": rows,
        "groups": labels.tolist(),
        "n_train": len(tr),
        "n_test": len(te),
        "seconds": time.perf_counter() - t0,
        "params": {
            "n_train": n_train,
            "seed": seed,
            "n_estimators": n_estimators,
            "max_depth": max_depth,
            "group": group,
        },
    }


def format_table(result: dict) -> str:
    head = f"| {'method':<50} | worst-group acc | worst-group log-loss | avg acc |"
    lines = [head, "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"]
    for r in result["rows"]:
        lines.append(
            f"| {r['method']:<50} | {r['worst_acc']:>15.4f} | {r['worst_logloss']:>20.4f} | {r['avg_acc']:>7.4f} |"
        )
    lines.append("")
    lines.append("mixture weights lambda (" + ", ".join(result["groups"]) + "):")
    for r in result["rows"]:
        w = ", ".join(f"{v:.3f}" for v in r["weights"].values())
        extra = f"  (gap {r['gap']:.2e} after {r['n_steps']} steps)" if "gap" in r else ""
        lines.append(f"  {r['method']:<50} [{w}]{extra}")
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
    for j, c in enumerate(feats):
        vals = [r[c] for r in rows]
        try:
            X[:, j] = np.array(vals, dtype=np.float64)
        except ValueError:  # categorical: integer codes
            _, X[:, j] = np.unique(np.array(vals), return_inverse=True)
    return X, np.array([r[target] for r in rows]), np.array([r[group] for r in rows]), feats


def _fit_command(a) -> int:
    from iclr25.shared import atomic_write

    X, y, g, feats = _read_csv(a.csv, a.target, a.group, a.features.split(",") if a.features else None)
    encode_groups(g)
    mm = MixMax(
        _xgb(a.n_estimators, a.max_depth, a.seed),
        density=a.density,
        cross_fit=a.cross_fit if a.cross_fit >= 2 else None,
        step_size=a.step_size,
        max_steps=a.max_steps,
        tol=a.tol,
        random_state=a.seed,
        verbose=True,
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
    d = sub.add_parser("demo", help="ERM vs balancing vs MixMax with XGBoost on UCI Adult (race groups)")
    d.add_argument("--n-train", type=int, default=16000)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--n-estimators", type=int, default=XGBDefaults.n_estimators)
    d.add_argument("--max-depth", type=int, default=XGBDefaults.max_depth)
    d.add_argument("--group", choices=["race", "sex"], default="race")
    d.add_argument("--json", default=None, help="also write the table as JSON here")
    f = sub.add_parser("fit", help="MixMax weights for your own CSV table")
    f.add_argument("--csv", required=True)
    f.add_argument("--target", required=True)
    f.add_argument("--group", required=True)
    f.add_argument("--features", default=None, help="comma-separated feature columns (default: all others)")
    f.add_argument("--density", choices=["kde", "classifier"], default="kde")
    f.add_argument("--cross-fit", type=int, default=2, help="folds; 0 = in-sample risks (official)")
    f.add_argument("--step-size", type=float, default=1.0)
    f.add_argument("--max-steps", type=int, default=2000)
    f.add_argument("--tol", type=float, default=1e-4)
    f.add_argument("--n-estimators", type=int, default=XGBDefaults.n_estimators)
    f.add_argument("--max-depth", type=int, default=XGBDefaults.max_depth)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--n-jobs", type=int, default=None, help="XGBoost threads (default: all cores)")
    f.add_argument("--out", default=None, help="write the weights as JSON here")
    a = p.parse_args(argv)
    if a.cmd == "demo":
        res = run_demo(a.n_train, a.seed, a.n_estimators, a.max_depth, a.group)
        print()
        print(format_table(res))
        print(f"\ntotal {res['seconds']:.0f}s")
        if a.json:
            from iclr25.shared import atomic_write

            with atomic_write(a.json, "w") as fh:
                json.dump(res, fh, indent=2)
        return 0
    try:
        return _fit_command(a)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
