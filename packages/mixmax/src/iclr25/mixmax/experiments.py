"""Multi-seed experiments on UCI Adult: the demo (ERM, balancing, MixMax, fairlearn, JTT on the test split) and the
robust-defaults study (MixMax variants on a validation split). Every arm is fitted with row weights of the same
normalisation (mean row weight 1), so arms differ only in how they weight the groups.

fairlearn is imported lazily (only by the fairlearn arm); matplotlib only by :func:`plot_worst_group`.
"""

from __future__ import annotations

import io
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._validation import encode_groups
from .estimators import MixMax, balanced_sample_weight, group_sample_weight
from .metrics import group_accuracy, group_log_loss

__all__ = [
    "SPLITS",
    "DemoSettings",
    "adult_split",
    "evaluate",
    "jtt_weights",
    "fit_fairlearn",
    "seed_ci",
    "paired_bootstrap",
    "summarise",
    "plot_worst_group",
]

SPLITS = ("test", "val")


@dataclass(frozen=True)
class DemoSettings:
    """Settings of the Adult experiments (reduced from the official XGBoost 200 trees / depth 8 for CPU time)."""

    n_train: int = 6000  # rows subsampled from adult.data per seed
    n_estimators: int = 100  # official: 200 (reduced for time; every arm uses the same model)
    max_depth: int = 6  # official: 8 (reduced for time)
    learning_rate: float = 0.1  # official
    jtt_id_estimators: int = 10  # JTT identification model: the same XGBoost stopped after 10 trees (ours)
    jtt_upweight: float = 5.0  # JTT lambda_up (Liu et al. 2021 search {4, 5, 6, 20, 50, 100}; ours: 5)
    # fairlearn BoundedGroupLoss(ZeroOneLoss) upper bound on every group's (training) error. None (ours): 0.9 x the
    # worst training-group error of the ERM model, so that the constraint binds: XGBoost fits its training rows
    # well, and a fixed bound such as 0.15 is already met by ERM, which makes EG return the ERM model unchanged.
    fairlearn_bound: float | None = None
    fairlearn_bound_factor: float = 0.9
    fairlearn_max_iter: int = 20  # fairlearn ExponentiatedGradient iterations (fairlearn default 50; reduced)
    group: str = "race"
    # XGBoost threads per fit (ours). One thread: on a shared 2-core machine OpenMP threads busy-wait and a
    # 2-thread fit cost ~10x the CPU time of a 1-thread fit in our measurements; the arms are many small fits.
    n_jobs: int = 1


def xgb(settings: DemoSettings, seed: int, n_estimators: int | None = None):
    from xgboost import XGBClassifier

    return XGBClassifier(
        n_estimators=n_estimators or settings.n_estimators,
        max_depth=settings.max_depth,
        learning_rate=settings.learning_rate,
        random_state=seed,
        n_jobs=settings.n_jobs,
    )


def adult_split(seed: int, n_train: int, split: str = "test", group: str = "race"):
    """(train, eval): train = ``n_train`` rows of adult.data drawn with ``seed``; eval = adult.test ("test") or the
    remaining adult.data rows ("val", for choosing defaults without touching the test split)."""
    from .data import load_adult

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    data = load_adult("train", group=group)
    if not 0 < n_train < len(data):
        raise ValueError(f"n_train must be in 1..{len(data) - 1}, got {n_train}")
    perm = np.random.default_rng(seed).permutation(len(data))
    tr = data.subset(np.sort(perm[:n_train]))
    ev = load_adult("test", group=group) if split == "test" else data.subset(np.sort(perm[n_train:]))
    return tr, ev


def evaluate(proba: np.ndarray, y: np.ndarray, groups: np.ndarray, pred: np.ndarray | None = None) -> dict:
    """Worst-group / average accuracy and log-loss, plus per-row correctness and NLL for the bootstrap.

    ``pred``: hard predictions for the accuracies (default: the argmax of ``proba``)."""
    proba = np.asarray(proba, dtype=np.float64)
    pred = proba.argmax(axis=1) if pred is None else np.asarray(pred)
    acc = group_accuracy(y, pred, groups)
    ll = group_log_loss(y, proba, groups)
    nll = -np.log(np.clip(proba[np.arange(len(y)), y], 1e-15, 1.0))
    return {
        "worst_acc": min(acc.values()),
        "worst_logloss": max(ll.values()),
        "avg_acc": float(np.mean(pred == y)),
        "group_acc": acc,
        "group_logloss": ll,
        "_correct": (pred == y).astype(np.float64),
        "_nll": nll,
    }


def jtt_weights(id_model, X, y, upweight: float) -> np.ndarray:
    """Just Train Twice (Liu et al., 2021): rows the identification model misclassifies get weight ``upweight``,
    the rest 1; rescaled to mean 1 (the normalisation of every other arm)."""
    wrong = np.asarray(id_model.predict(X)) != y
    w = np.where(wrong, upweight, 1.0)
    return w * len(w) / w.sum()


def fit_fairlearn(estimator, X, y, groups, bound: float, max_iter: int):
    """fairlearn ExponentiatedGradient with BoundedGroupLoss(ZeroOneLoss): every group's error <= ``bound``.

    Labels must be 0/1. Returns (eg, proba, predict).

    ``predict``: the randomized classifier's most probable label. It predicts base model t's label with
    probability ``weights_[t]``, so this is the EG-weighted majority vote. (fairlearn's ``_pmf_predict`` returns
    the per-model predictions for a loss moment such as BoundedGroupLoss, not label probabilities.)
    ``proba``: the EG-weighted mixture of the base models' ``predict_proba``, used for the log-loss. The
    randomized classifier's own label distribution (a weighted vote of hard labels) is exactly 0 or 1 on most rows
    and would give a clipped log-loss of ~34 nats, which measures the clip and not the model."""
    from fairlearn.reductions import BoundedGroupLoss, ExponentiatedGradient, ZeroOneLoss

    if not np.isin(np.unique(y), [0, 1]).all():
        raise ValueError(f"fit_fairlearn needs 0/1 labels, got {np.unique(y).tolist()[:10]}")

    eg = ExponentiatedGradient(
        estimator, constraints=BoundedGroupLoss(ZeroOneLoss(), upper_bound=bound), max_iter=max_iter
    )
    with warnings.catch_warnings():  # fairlearn's own pandas deprecation warnings, not ours to act on
        warnings.filterwarnings("ignore", module="fairlearn")
        eg.fit(X, y, sensitive_features=groups)
    w = np.asarray(eg.weights_, dtype=np.float64)
    models = list(eg.predictors_)

    def proba(Xq):
        return sum(wt * np.asarray(m.predict_proba(Xq), dtype=np.float64) for wt, m in zip(w, models) if wt > 0)

    def predict(Xq):  # the label the randomized classifier gives with probability > 1/2 (ties: label 0)
        votes = sum(wt * np.asarray(m.predict(Xq), dtype=np.float64) for wt, m in zip(w, models) if wt > 0)
        return (votes > 0.5).astype(np.int64)

    return eg, proba, predict


def seed_ci(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lower, upper): Student-t interval over seeds."""
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    m = float(v.mean())
    if len(v) < 2:
        return m, float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return m, m - half, m + half


def _worst(per_row: np.ndarray, codes: np.ndarray, G: int, worst: Callable) -> float:
    counts = np.bincount(codes, minlength=G)
    means = np.bincount(codes, weights=per_row, minlength=G)[counts > 0] / counts[counts > 0]
    return float(worst(means))


def paired_bootstrap(
    runs: list[dict], arm_a: str, arm_b: str, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> dict:
    """Two-level paired bootstrap of arm_a - arm_b on worst-group accuracy and log-loss.

    Each replicate resamples the seeds with replacement and, within each drawn seed, the evaluation rows with
    replacement (the same rows for both arms), then averages the per-seed differences of the worst-group metric.
    Returns {"acc": (mean, lo, hi), "logloss": (mean, lo, hi)} (point estimate = mean over seeds).
    """
    rng = np.random.default_rng(seed)
    S = len(runs)
    out = {}
    for key, worst, name in (("_correct", np.min, "acc"), ("_nll", np.max, "logloss")):
        point = []
        per_seed = []
        for r in runs:
            codes = r["codes"]
            G = int(codes.max()) + 1
            a, b = r["arms"][arm_a][key], r["arms"][arm_b][key]
            point.append(_worst(a, codes, G, worst) - _worst(b, codes, G, worst))
            per_seed.append((codes, G, a, b))
        reps = np.empty(n_boot)
        for i in range(n_boot):
            diffs = []
            for s in rng.integers(0, S, S):
                codes, G, a, b = per_seed[s]
                idx = rng.integers(0, len(codes), len(codes))
                diffs.append(_worst(a[idx], codes[idx], G, worst) - _worst(b[idx], codes[idx], G, worst))
            reps[i] = np.mean(diffs)
        lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
        out[name] = (float(np.mean(point)), float(lo), float(hi))
    return out


def run_seed(seed: int, settings: DemoSettings, arms: dict, split: str, log=print) -> dict:
    """One seed: split, then every arm ``name -> fn(tr, seed, ctx) -> (proba function, info)``; returns per-arm
    metrics. An ``info["predict"]`` callable, if given, supplies the hard predictions for the accuracies."""
    t0 = time.perf_counter()
    tr, ev = adult_split(seed, settings.n_train, split, settings.group)
    labels = np.unique(tr.groups)
    ev_codes, _ = encode_groups(ev.groups, labels)
    ctx: dict = {}
    res = {"seed": seed, "codes": ev_codes, "labels": labels.tolist(), "arms": {}, "info": {}}
    for name, fn in arms.items():
        t1 = time.perf_counter()
        proba_fn, info = fn(tr, seed, ctx)
        predict = info.pop("predict", None)  # an arm may give its own hard predictions
        pred = None if predict is None else predict(ev.X)
        res["arms"][name] = evaluate(proba_fn(ev.X), ev.y, ev.groups, pred)
        res["info"][name] = dict(info, seconds=time.perf_counter() - t1)
    res["seconds"] = time.perf_counter() - t0
    log(f"  seed {seed}: {res['seconds']:.0f}s")
    return res


def mixmax_arm(cache_key: str, make: Callable[[int], MixMax], settings: DemoSettings, shrink: float | None = None):
    """An arm that solves lambda with ``make(seed)``'s solver settings on a cache shared between arms (keyed by
    ``cache_key``), then fits the final model with the same ("mean") weight normalisation as every arm."""

    def fn(tr, seed, ctx):
        mm = make(seed)
        if cache_key not in ctx:
            ctx[cache_key] = mm.fit_weights(tr.X, tr.y, tr.groups)
        base = ctx[cache_key]
        cache = base.cache_
        if shrink is not None:  # shrink held-out risks toward the pooled risk by n_g / (n_g + k)
            from .objective import RiskCache

            class _Shrunk(RiskCache):
                def risks(self, lam):
                    r = RiskCache.risks(self, lam)
                    pooled = float(np.dot(self.counts, r) / self.counts.sum())
                    a = self.counts / (self.counts + shrink)
                    return a * r + (1 - a) * pooled

            cache = _Shrunk(cache.groups, cache.log_px, cache.target, cache.n_groups, cache.loss, cache.y, cache.eps)
        sol = mm.solve(cache)
        w = group_sample_weight(tr.groups, sol.weights, base.groups_, "mean")
        model = xgb(settings, seed).fit(tr.X, tr.y, sample_weight=w)
        info = {
            "weights": sol.weights.tolist(),
            "gap": sol.gap,
            "n_steps": sol.n_steps,
            "separation": base.separation_,
        }
        return model.predict_proba, info

    return fn


def baseline_arms(settings: DemoSettings) -> dict:
    def erm(tr, seed, ctx):
        return xgb(settings, seed).fit(tr.X, tr.y).predict_proba, {}

    def balancing(tr, seed, ctx):
        w = balanced_sample_weight(tr.groups, "mean")
        return xgb(settings, seed).fit(tr.X, tr.y, sample_weight=w).predict_proba, {}

    return {"ERM": erm, "Group balancing": balancing}


def demo_arms(settings: DemoSettings, fairlearn: bool = True, jtt: bool = True) -> dict:
    arms = baseline_arms(settings)
    est = lambda seed: xgb(settings, seed)  # noqa: E731
    arms["MixMax (defaults)"] = mixmax_arm("default", lambda s: MixMax(est(s), random_state=s), settings)
    arms["MixMax official preset"] = mixmax_arm("official", lambda s: MixMax.official(est(s), random_state=s), settings)
    if jtt:

        def jtt_arm(tr, seed, ctx):
            idm = xgb(settings, seed, settings.jtt_id_estimators).fit(tr.X, tr.y)
            w = jtt_weights(idm, tr.X, tr.y, settings.jtt_upweight)
            return xgb(settings, seed).fit(tr.X, tr.y, sample_weight=w).predict_proba, {}

        arms["JTT"] = jtt_arm
    if fairlearn:

        def fl_arm(tr, seed, ctx):
            bound = settings.fairlearn_bound
            if bound is None:
                erm = xgb(settings, seed).fit(tr.X, tr.y)
                acc = group_accuracy(tr.y, erm.predict(tr.X), tr.groups)
                bound = settings.fairlearn_bound_factor * (1.0 - min(acc.values()))
            eg, proba, predict = fit_fairlearn(
                xgb(settings, seed), tr.X, tr.y, tr.groups, bound, settings.fairlearn_max_iter
            )
            return proba, {"predict": predict, "bound": bound, "n_predictors": int(np.sum(eg.weights_ > 0))}

        arms["fairlearn EG (BoundedGroupLoss)"] = fl_arm
    return arms


def study_arms(settings: DemoSettings, entropies=(0.03, 0.1, 0.3)) -> dict:
    """MixMax variants for the robust-defaults study (the remedies the paper's setting allows)."""
    arms = baseline_arms(settings)
    est = lambda seed: xgb(settings, seed)  # noqa: E731

    def cf(seed, **kw):
        return MixMax(est(seed), cross_fit=2, random_state=seed, **kw)

    def ins(seed, **kw):
        return MixMax(est(seed), cross_fit=None, random_state=seed, **kw)

    arms["official preset (in-sample, raw KDE, 20 x 0.1)"] = mixmax_arm(
        "official", lambda s: MixMax.official(est(s), random_state=s), settings
    )
    arms["in-sample, tau=0"] = mixmax_arm("in", lambda s: ins(s, entropy=0.0), settings)
    arms["cross-fit, tau=0"] = mixmax_arm("cf", lambda s: cf(s, entropy=0.0), settings)
    arms["cross-fit, early stop (20 x 0.1)"] = mixmax_arm(
        "cf", lambda s: cf(s, entropy=0.0, step_size=0.1, max_steps=20, tol=None), settings
    )
    arms["cross-fit, averaged (100 x 1.0)"] = mixmax_arm(
        "cf", lambda s: cf(s, entropy=0.0, max_steps=100, tol=None, average=True), settings
    )
    arms["cross-fit, shrunk risks (k=500), tau=0"] = mixmax_arm("cf", lambda s: cf(s, entropy=0.0), settings, 500.0)
    arms["cross-fit, bandwidth 1.0, tau=0"] = mixmax_arm("cf-bw", lambda s: cf(s, entropy=0.0, bandwidth=1.0), settings)
    for tau in entropies:
        arms[f"cross-fit, tau={tau:g}"] = mixmax_arm("cf", lambda s, t=tau: cf(s, entropy=t), settings)
        arms[f"in-sample, tau={tau:g}"] = mixmax_arm("in", lambda s, t=tau: ins(s, entropy=t), settings)
    return arms


def summarise(runs: list[dict]) -> list[dict]:
    """Per arm: mean and 95% t-interval over seeds of worst-group accuracy / log-loss and average accuracy."""
    rows = []
    for name in runs[0]["arms"]:
        row = {"method": name}
        for key in ("worst_acc", "worst_logloss", "avg_acc"):
            row[key] = seed_ci([r["arms"][name][key] for r in runs])
        infos = [r["info"][name] for r in runs]
        if "weights" in infos[0]:
            row["weights_mean"] = np.mean([i["weights"] for i in infos], axis=0).tolist()
            row["separation_median"] = float(np.median([i["separation"] for i in infos]))
        if "bound" in infos[0]:
            row["bound_mean"] = float(np.mean([i["bound"] for i in infos]))
            row["n_predictors_mean"] = float(np.mean([i["n_predictors"] for i in infos]))
        row["seconds_mean"] = float(np.mean([i["seconds"] for i in infos]))
        rows.append(row)
    return rows


def format_summary(rows: list[dict], labels: list[str]) -> str:
    head = f"| {'method':<48} | worst-group acc (95% CI) | worst-group log-loss (95% CI) | avg acc |"
    lines = [head, "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"]
    for r in rows:
        a, ll, avg = r["worst_acc"], r["worst_logloss"], r["avg_acc"]
        lines.append(
            f"| {r['method']:<48} | {a[0]:.4f} [{a[1]:.4f}, {a[2]:.4f}] | "
            f"{ll[0]:>9.4f} [{ll[1]:.4f}, {ll[2]:.4f}]   | {avg[0]:.4f}  |"
        )
    lam = [r for r in rows if "weights_mean" in r]
    if lam:
        lines.append("")
        lines.append("mean lambda over seeds (" + ", ".join(labels) + "):")
        for r in lam:
            w = ", ".join(f"{v:.3f}" for v in r["weights_mean"])
            lines.append(f"  {r['method']:<48} [{w}]  separation {r['separation_median']:.1f} nats")
    for r in rows:
        if "bound_mean" in r:
            lines.append(
                f"  {r['method']}: error bound {r['bound_mean']:.4f} (mean over seeds), "
                f"{r['n_predictors_mean']:.1f} base models with weight > 0"
            )
    return "\n".join(lines)


def plot_worst_group(rows: list[dict], path: str, title: str) -> None:
    """Bar chart of worst-group accuracy per arm with its 95% CI, written atomically as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclr25.shared import atomic_write

    names = [r["method"] for r in rows]
    m = np.array([r["worst_acc"][0] for r in rows])
    err = np.array([[m_ - r["worst_acc"][1], r["worst_acc"][2] - m_] for m_, r in zip(m, rows)]).T
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.5))
    ax.barh(range(len(rows)), m, xerr=err, color="#4c72b0", capsize=3)
    ax.set_yticks(range(len(rows)), names)
    ax.invert_yaxis()
    lo = float(np.nanmin(m - err[0]))
    ax.set_xlim(max(0.0, lo - 0.05), min(1.0, float(np.nanmax(m + err[1])) + 0.02))
    ax.set_xlabel("worst-group test accuracy (mean over seeds, 95% CI)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    with atomic_write(path, "wb") as f:
        f.write(buf.getvalue())
