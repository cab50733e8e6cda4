"""MixMax as a scikit-learn estimator (default model XGBoost, as in the official code).

Pipeline (the paper's "E^2 MixMax", where p_g(y|x) and p_g(x) are estimated):

1. fit, per group g, a conditional model p_g(y|x) (classifier with ``predict_proba``; for MSE a regressor
   m_g(x) = E_g[y|x]) and a covariate density p_g(x) (KDE per group, or a classifier density ratio);
2. evaluate every group's model and density ONCE on the risk rows (up to ``max_samples`` per group) and cache them;
   with ``cross_fit=K`` each row is evaluated by models fit on the other K-1 folds, so risks are not measured on
   the rows the models were fit on (the official scripts reuse the training rows);
3. maximise L(lambda) + tau H(lambda) = sum_g lambda_g R_g(f_lambda) + tau H(lambda) by exponentiated-gradient
   ascent with an empirical-gap stop (tau = ``entropy``; 0 is the paper's objective);
4. fit the final estimator with per-row sample weights; every group's total weight is proportional to lambda_g.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, has_fit_parameter, validate_data

from ._validation import check_no_missing, check_sample_weight, encode_groups
from .config import OFFICIAL, MixMaxConfig, XGBDefaults
from .density import ClassifierDensityRatio, GroupKDE, bandwidth_rule
from .objective import RiskCache
from .solvers import MirrorAscentResult, mirror_ascent

__all__ = [
    "MixMax",
    "SeparableGroupsWarning",
    "balanced_sample_weight",
    "erm_sample_weight",
    "group_sample_weight",
]

_D = MixMaxConfig()
NORMALIZATIONS = ("mean", "official")


class SeparableGroupsWarning(UserWarning):
    """The groups are (nearly) separable in x, so f_lambda hardly depends on lambda (see ``MixMax.separation_``)."""


def group_sample_weight(
    groups, weights, group_labels: np.ndarray | None = None, normalization: str = "mean", sample_weight=None
) -> np.ndarray:
    """Row weights that give group g a total weight proportional to ``weights[g]`` (lambda).

    normalization:
        "mean" (default, ours): w_i = lambda_g * N / n_g with lambda normalised to sum 1, so the weights sum to N
        (mean row weight 1) whatever lambda is: ERM (lambda_g = n_g / N) gives all ones, and balancing, MixMax and
        ERM are fitted at the same weight scale (XGBoost's min_child_weight and L2 penalty see the same scale).
        "official": w_i = (lambda_g / max lambda) * (n_max / n_g), the official scripts' normalisation.
    sample_weight: optional base row weights; then n_g is the group's weighted size and w_i is multiplied by them.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
    codes, known = encode_groups(groups, group_labels)
    try:
        lam = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError("weights must be numeric, one mixture weight per group") from exc
    if lam.shape != (len(known),):
        raise ValueError(f"weights must have one entry per group ({len(known)}), got shape {lam.shape}")
    if not np.all(np.isfinite(lam)) or np.any(lam < 0) or not lam.sum() > 0:
        raise ValueError(f"weights must be finite, nonnegative and not all 0 (mixture weights), got {lam.tolist()}")
    base = check_sample_weight(sample_weight, len(codes))
    counts = np.bincount(codes, weights=base, minlength=len(known)).astype(np.float64)
    lam = lam / lam.sum()
    absent = (counts == 0) & (lam > 0)
    if np.any(absent):
        raise ValueError(f"groups {known[absent].tolist()} have weight but no rows (of positive sample weight)")
    safe = np.where(counts > 0, counts, 1.0)
    if normalization == "mean":
        per_group = lam * base.sum() / safe
    else:
        per_group = (lam / lam.max()) * (counts.max() / safe)
    return per_group[codes] * base


def balanced_sample_weight(groups, normalization: str = "mean", sample_weight=None) -> np.ndarray:
    """Group balancing: equal total weight per group (uniform lambda), normalised like every other arm.

    "mean": N / (G n_g) (mean row weight 1); "official": n_max / n_g (the official baseline's weights).
    """
    _, known = encode_groups(groups)
    uniform = np.full(len(known), 1.0 / len(known))
    return group_sample_weight(groups, uniform, known, normalization, sample_weight)


def erm_sample_weight(groups) -> np.ndarray:
    """ERM: every row weight 1 (lambda_g = n_g / N; identical under both normalisations)."""
    return np.ones(len(check_no_missing(groups, "groups")), dtype=np.float64)


def default_estimator(loss: str = "ce"):
    """The official per-group model: XGBoost with n_estimators=200, max_depth=8, learning_rate=0.1."""
    import xgboost as xgb

    d = XGBDefaults()
    if loss == "ce":
        return xgb.XGBClassifier(n_estimators=d.n_estimators, max_depth=d.max_depth, learning_rate=d.learning_rate)
    return xgb.XGBRegressor(n_estimators=d.n_estimators, max_depth=d.max_depth, learning_rate=d.learning_rate)


def accepts_sample_weight(estimator) -> bool:
    """True if ``estimator.fit`` takes ``sample_weight`` (for a Pipeline: its last step's fit)."""
    from sklearn.pipeline import Pipeline

    if isinstance(estimator, Pipeline):
        last = estimator.steps[-1][1]
        return last != "passthrough" and last is not None and accepts_sample_weight(last)
    return has_fit_parameter(estimator, "sample_weight")


def fit_weighted(estimator, X, y, sample_weight):
    """``estimator.fit(X, y, sample_weight=w)``; for a Pipeline the weights go to its last step."""
    from sklearn.pipeline import Pipeline

    if sample_weight is None:
        return estimator.fit(X, y)
    if isinstance(estimator, Pipeline):
        return estimator.fit(X, y, **{f"{estimator.steps[-1][0]}__sample_weight": sample_weight})
    return estimator.fit(X, y, sample_weight=sample_weight)


@dataclass
class _Conditional:
    """A fitted group model mapped onto the global classes (a class absent from the group gets probability eps)."""

    model: object | None
    present: np.ndarray  # global class codes seen by this group's model
    n_classes: int
    eps: float
    loss: str

    def log_proba(self, X: np.ndarray) -> np.ndarray:
        out = np.full((len(X), self.n_classes), self.eps)
        if self.model is None:  # a single class in this group: constant predictor
            out[:, self.present[0]] = 1.0
        else:
            p = np.asarray(self.model.predict_proba(X), dtype=np.float64)
            out[:, self.present] = p
        return np.log(np.clip(out, self.eps, 1.0))

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(X), dtype=np.float64)


def _is_int(v, low: int) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= low


def _is_pos_float(v, allow_zero: bool = False) -> bool:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v):
        return False
    return v >= 0 if allow_zero else v > 0


class MixMax(ClassifierMixin, BaseEstimator):
    """MixMax: group DRO in function space via the optimal data mixture (Thudi & Maddison, ICLR 2025).

    A scikit-learn estimator: ``fit(X, y, groups=None, sample_weight=None)``, ``predict``, ``predict_proba``,
    ``score``; works with ``clone``, ``Pipeline`` (``pipe.fit(X, y, mixmax__groups=g, mixmax__sample_weight=w)``),
    ``cross_val_score(..., params={"groups": g})`` and ``GridSearchCV`` (give ``group_column`` so the groups travel
    inside X, or enable sklearn metadata routing and ``set_fit_request(groups=True)``). It is a classifier for
    ``loss="ce"`` and a regressor for ``loss="mse"`` (its sklearn tags and ``score`` follow ``loss``). Without groups (and without
    ``group_column``) every row is one group, lambda = [1] and MixMax is the weighted ERM fit of ``estimator``.

    Args:
        estimator: sklearn-style model used for the per-group conditionals and (unless ``final_estimator``) for the
            final weighted fit; cloned; its ``fit`` must accept ``sample_weight`` (checked before anything is fit).
            Classifier with ``predict_proba`` for ``loss="ce"``, regressor for "mse". Default: XGBoost with the
            official hyperparameters.
        density: "kde" (Gaussian KDE per group), "classifier" (density ratio P(g|x)/pi_g), or an object with
            ``fit(X, groups, n_groups)`` and ``log_density_matrix(X)``.
        cross_fit: K >= 2 for K-fold cross-fitted risks, or None for the official in-sample (data reuse) risks.
        step_size, max_steps, tol, average: mirror-ascent settings (see :func:`iclr25.mixmax.solvers.mirror_ascent`).
        entropy: tau >= 0, entropy regularisation of lambda (0 = the paper's objective; see the README study).
        weight_normalization: "mean" (default: mean row weight 1, as for every baseline arm) or "official".
        group_column: index of the column of X holding the group label (kept as a feature, as the official ACSIncome
            features keep their group column); used when ``groups`` is not passed.
        max_samples: at most this many risk rows per group (official 25000).
        eps: probability clip for CE.
        density_estimator: classifier for ``density="classifier"`` (default a small XGBoost).
        device, kde_backend: where the KDE runs ("cuda" + "auto" = the fused Triton kernel; CPU: chunked float64).
        random_state: seeds the fold split and the risk-row subsample.
    Fitted attributes: ``weights_`` [G], ``group_risks_`` [G], ``groups_`` (group labels), ``classes_``, ``gap_``
    (the empirical gap: computed from estimated risks, not a certificate for the population problem),
    ``n_steps_``, ``converged_``, ``separation_`` (median own-group log-density margin, nats), ``solve_``,
    ``cache_``, ``fold_models_``, ``estimator_``, ``n_features_in_``.
    """

    def __init__(
        self,
        estimator=None,
        density="kde",
        *,
        loss: str = _D.loss,
        bandwidth: str | float = _D.bandwidth,
        standardize: bool = _D.standardize,
        cross_fit: int | None = _D.cross_fit,
        step_size: float = _D.solver.step_size,
        max_steps: int = _D.solver.max_steps,
        tol: float | None = _D.solver.tol,
        average: bool = _D.solver.average,
        entropy: float = _D.entropy,
        weight_normalization: str = _D.weight_normalization,
        group_column: int | None = None,
        max_samples: int = _D.max_samples,
        eps: float = _D.eps,
        density_estimator=None,
        final_estimator=None,
        device=None,
        kde_backend: str = "auto",
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.density = density
        self.loss = loss
        self.bandwidth = bandwidth
        self.standardize = standardize
        self.cross_fit = cross_fit
        self.step_size = step_size
        self.max_steps = max_steps
        self.tol = tol
        self.average = average
        self.entropy = entropy
        self.weight_normalization = weight_normalization
        self.group_column = group_column
        self.max_samples = max_samples
        self.eps = eps
        self.density_estimator = density_estimator
        self.final_estimator = final_estimator
        self.device = device
        self.kde_backend = kde_backend
        self.random_state = random_state
        self.verbose = verbose

    @classmethod
    def official(cls, estimator=None, **kwargs) -> MixMax:
        """The official tabular preset: in-sample risks, raw-feature KDE, 20 steps of eta = 0.1, last iterate,
        no entropy term, official weight normalisation."""
        params = dict(
            cross_fit=None,
            standardize=False,
            step_size=OFFICIAL.step_size,
            max_steps=OFFICIAL.max_steps,
            tol=OFFICIAL.tol,
            average=OFFICIAL.average,
            entropy=OFFICIAL.entropy,
            weight_normalization="official",
        )
        params.update(kwargs)
        return cls(estimator, **params)

    # ------------------------------------------------------------------ sklearn plumbing
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self.loss == "mse":
            tags.estimator_type = "regressor"
            tags.classifier_tags = None
            from sklearn.utils import RegressorTags

            tags.regressor_tags = RegressorTags()
        return tags

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy (``loss="ce"``) or R^2 (``loss="mse"``) of ``predict(X)``."""
        if self.loss == "mse":
            from sklearn.metrics import r2_score

            return float(r2_score(y, self.predict(X), sample_weight=sample_weight))
        return ClassifierMixin.score(self, X, y, sample_weight=sample_weight)

    # ------------------------------------------------------------------ checks (all before anything is fit)
    def _validate_params(self) -> None:
        """Check every parameter; raises ValueError/TypeError naming the parameter and what was expected."""
        bad = []
        if self.loss not in ("ce", "mse"):
            bad.append(f"loss must be 'ce' or 'mse', got {self.loss!r}")
        if not (isinstance(self.density, str) and self.density in ("kde", "classifier")) and not (
            hasattr(self.density, "fit") and hasattr(self.density, "log_density_matrix")
        ):
            bad.append(f"density must be 'kde', 'classifier' or a density object, got {self.density!r}")
        try:
            bandwidth_rule(self.bandwidth, 2, 1)
        except (ValueError, TypeError) as exc:
            bad.append(str(exc))
        if not isinstance(self.standardize, (bool, np.bool_)):
            bad.append(f"standardize must be a bool, got {self.standardize!r}")
        if self.cross_fit is not None and not _is_int(self.cross_fit, 2):
            bad.append(f"cross_fit must be None or an integer >= 2, got {self.cross_fit!r}")
        if not _is_pos_float(self.step_size):
            bad.append(f"step_size must be a positive finite float, got {self.step_size!r}")
        if not _is_int(self.max_steps, 0):
            bad.append(f"max_steps must be an integer >= 0, got {self.max_steps!r}")
        if self.tol is not None and not _is_pos_float(self.tol, allow_zero=True):
            bad.append(f"tol must be None or a finite float >= 0, got {self.tol!r}")
        if not isinstance(self.average, (bool, np.bool_)):
            bad.append(f"average must be a bool, got {self.average!r}")
        if not _is_pos_float(self.entropy, allow_zero=True):
            bad.append(f"entropy must be a finite float >= 0, got {self.entropy!r}")
        elif _is_pos_float(self.step_size) and self.entropy * self.step_size >= 1:
            bad.append(f"entropy * step_size must be < 1, got {self.entropy} * {self.step_size}")
        if self.weight_normalization not in NORMALIZATIONS:
            bad.append(f"weight_normalization must be one of {NORMALIZATIONS}, got {self.weight_normalization!r}")
        if self.group_column is not None and not isinstance(self.group_column, numbers.Integral):
            bad.append(f"group_column must be None or a column index, got {self.group_column!r}")
        if not _is_int(self.max_samples, 1):
            bad.append(f"max_samples must be a positive integer, got {self.max_samples!r}")
        if not (_is_pos_float(self.eps) and self.eps < 1):
            bad.append(f"eps must be a float in (0, 1), got {self.eps!r}")
        if self.kde_backend not in ("auto", "torch", "triton"):
            bad.append(f"kde_backend must be 'auto', 'torch' or 'triton', got {self.kde_backend!r}")
        if self.device is not None:
            import torch

            try:
                torch.device(self.device)
            except (RuntimeError, TypeError) as exc:
                bad.append(f"device must be None or a torch device such as 'cpu' or 'cuda', got {self.device!r}")
                del exc
        for name in ("estimator", "final_estimator"):
            est = getattr(self, name)
            if est is None:
                continue
            if not hasattr(est, "fit"):
                bad.append(f"{name} must be an estimator with fit(), got {type(est).__name__}")
            elif name == "final_estimator" or self.final_estimator is None:
                if not accepts_sample_weight(est):
                    bad.append(
                        f"{name} {type(est).__name__}.fit does not accept sample_weight, which MixMax needs for the "
                        "weighted final fit; pass a final_estimator whose fit takes sample_weight"
                    )
            if name == "estimator" and self.loss == "ce" and not hasattr(est, "predict_proba"):
                bad.append(f"estimator must have predict_proba for loss='ce', got {type(est).__name__}")
        if bad:
            raise ValueError("invalid MixMax parameters: " + "; ".join(bad))

    def _check_groups(self, X_raw, groups, n: int) -> np.ndarray:
        if groups is None:
            if self.group_column is None:
                return np.zeros(n, dtype=np.int64)
            Xa = np.asarray(X_raw)
            if Xa.ndim != 2 or not -Xa.shape[1] <= self.group_column < Xa.shape[1]:
                raise ValueError(f"group_column={self.group_column} is not a column of X with shape {Xa.shape}")
            groups = Xa[:, self.group_column]
        g = check_no_missing(groups, "groups")
        if g.ndim != 1 or len(g) != n:
            raise ValueError(f"groups must be 1-D with one label per row of X ({n}), got shape {g.shape}")
        if g.dtype.kind == "f" and not np.all(g == np.round(g)):
            raise ValueError("float group labels must be whole numbers (group ids); got fractional values")
        return g

    def _prepare(self, X, y, groups, sample_weight=None, reset: bool = True):
        """Validated arrays: X [n, d] float64, y (CE: class codes; MSE: float), group codes, labels, row weights."""
        X_raw = X
        if y is not None and self.loss == "ce":
            y_arr = np.asarray(y)
            if y_arr.dtype.kind in "OUS":
                check_no_missing(y_arr.ravel(), "y")
        X, y = validate_data(self, X, y, reset=reset, dtype=np.float64, y_numeric=self.loss == "mse")
        n = len(X)
        g = self._check_groups(X_raw, groups, n)
        codes, known = encode_groups(g)
        sw = check_sample_weight(sample_weight, n)
        if self.loss == "ce":
            check_classification_targets(y)
            classes, ycodes = np.unique(y, return_inverse=True)
            if len(classes) < 2:
                raise ValueError(f"y has only 1 class ({classes.tolist()}); loss='ce' needs at least 2 classes")
            return X, ycodes.astype(np.int64), classes, codes, known, sw
        return X, np.asarray(y, dtype=np.float64), None, codes, known, sw

    # ------------------------------------------------------------------ per-group models
    def _new_estimator(self):
        return clone(self.estimator) if self.estimator is not None else default_estimator(self.loss)

    def _new_density(self):
        if self.density == "kde":
            return GroupKDE(self.bandwidth, standardize=self.standardize, backend=self.kde_backend, device=self.device)
        if self.density == "classifier":
            return ClassifierDensityRatio(self.density_estimator, eps=self.eps)
        try:
            return clone(self.density)
        except TypeError:
            return self.density

    def _fit_conditional(self, X, y, w) -> _Conditional:
        uniform = np.all(w == w[0])
        if self.loss == "mse":
            m = fit_weighted(self._new_estimator(), X, y, None if uniform else w)
            return _Conditional(m, np.zeros(0, np.int64), 0, self.eps, "mse")
        present = np.unique(y)
        if len(present) == 1:
            return _Conditional(None, present, self.n_classes_, self.eps, "ce")
        model = fit_weighted(self._new_estimator(), X, np.searchsorted(present, y), None if uniform else w)
        return _Conditional(model, present, self.n_classes_, self.eps, "ce")

    def fit_group_models(self, X, y, codes, rows, sample_weight=None):
        """Fit the per-group conditionals and the group density on ``rows``; returns (conditionals, density)."""
        w = check_sample_weight(sample_weight, len(X))
        conds = []
        for g in range(self.n_groups_):
            r = rows[(codes[rows] == g) & (w[rows] > 0)]
            if len(r) == 0:
                raise ValueError(f"group {self.groups_[g]!r} has no rows to fit its model on (too few rows per fold?)")
            conds.append(self._fit_conditional(X[r], y[r], w[r]))
        dens = self._new_density()
        if sample_weight is None or np.all(w == w[0]):
            dens = dens.fit(X[rows], codes[rows], self.n_groups_)
        else:
            dens = dens.fit(X[rows], codes[rows], self.n_groups_, sample_weight=w[rows])
        return conds, dens

    def evaluate_group_models(self, conds, dens, X, y) -> tuple[np.ndarray, np.ndarray]:
        """Cache entries for rows X: log p_h(x) [n, G] and, per group model h, log p_h(y|x) (CE) or m_h(x) (MSE)."""
        log_px = np.asarray(dens.log_density_matrix(X), dtype=np.float64)
        if self.loss == "ce":
            target = np.stack([c.log_proba(X)[np.arange(len(X)), y] for c in conds], axis=1)
        else:
            target = np.stack([c.predict(X) for c in conds], axis=1)
        return log_px, target

    def plan_folds(self, codes: np.ndarray, sample_weight=None) -> list[tuple[np.ndarray, np.ndarray]]:
        """(train rows, risk rows) per fold. Risk rows: up to ``max_samples`` random rows (of positive weight) per
        group."""
        rng = np.random.default_rng(self.random_state)
        n = len(codes)
        w = check_sample_weight(sample_weight, n)
        K = self.cross_fit
        fold = np.zeros(n, dtype=np.int64)
        risk = np.zeros(n, dtype=bool)
        for g in range(self.n_groups_):
            idx = rng.permutation(np.flatnonzero((codes == g) & (w > 0)))
            if K is not None and len(idx) < K:
                s = "sample" if len(idx) == 1 else "samples"
                raise ValueError(
                    f"group {self.groups_[g]!r} has {len(idx)} {s}, fewer than cross_fit={K} folds; "
                    "use fewer folds or cross_fit=None"
                )
            if len(idx) == 0:
                raise ValueError(f"group {self.groups_[g]!r} has no rows of positive sample weight")
            risk[idx[: self.max_samples]] = True
            if K is not None:
                fold[idx] = np.arange(len(idx)) % K
        all_rows = np.arange(n)
        if K is None:
            return [(all_rows, np.flatnonzero(risk))]
        return [(np.flatnonzero(fold != k), np.flatnonzero((fold == k) & risk)) for k in range(K)]

    def build_cache(self, X, y, groups=None, sample_weight=None) -> RiskCache:
        """Fit the group models (per fold) and evaluate them once on the risk rows."""
        self._validate_params()
        X, y, classes, codes, known, sw = self._prepare(X, y, groups, sample_weight)
        self.groups_, self.classes_, self.n_groups_ = known, classes, len(known)
        if classes is None and hasattr(self, "classes_"):
            del self.classes_
        self.n_classes_ = 0 if classes is None else len(classes)
        weighted = sample_weight is not None
        folds = self.plan_folds(codes, sw)
        parts, self.fold_models_ = [], []
        if self.verbose:
            from iclr25.shared import progress

            folds_iter = progress(folds, desc="MixMax group models", unit="fold")
        else:
            folds_iter = folds
        for train, risk in folds_iter:
            conds, dens = self.fit_group_models(X, y, codes, train, sw if weighted else None)
            self.fold_models_.append((conds, dens, risk))
            parts.append((risk, *self.evaluate_group_models(conds, dens, X[risk], y[risk])))
        rows = np.concatenate([p[0] for p in parts])
        return RiskCache(
            groups=codes[rows],
            log_px=np.concatenate([p[1] for p in parts]),
            target=np.concatenate([p[2] for p in parts]),
            n_groups=self.n_groups_,
            loss=self.loss,
            y=None if self.loss == "ce" else y[rows],
            eps=self.eps,
            weights=sw[rows] if weighted else None,
        )

    def solve(self, cache: RiskCache) -> MirrorAscentResult:
        return mirror_ascent(
            cache.risks,
            cache.n_groups,
            step_size=self.step_size,
            max_steps=self.max_steps,
            tol=self.tol,
            average=self.average,
            entropy=self.entropy,
        )

    # ------------------------------------------------------------------ public API
    def fit_weights(self, X, y, groups=None, sample_weight=None) -> MixMax:
        """Estimate the MixMax mixture weights (sets ``weights_``, ``group_risks_``, ...) without the final fit."""
        self.cache_ = self.build_cache(X, y, groups, sample_weight)
        margin = self.cache_.own_group_margin()
        self.separation_ = float(np.median(margin)) if self.n_groups_ > 1 else 0.0
        if self.n_groups_ > 1 and self.separation_ > _D.separation_warning:
            warnings.warn(
                f"the groups are nearly separable in x: median own-group log-density margin {self.separation_:.1f} "
                f"nats (> {_D.separation_warning}), so f_lambda barely depends on lambda and the unregularised "
                "solution sits on a vertex (one group). Consider entropy > 0, a wider bandwidth, or leaving "
                "group-identifying columns out of the density features.",
                SeparableGroupsWarning,
                stacklevel=2,
            )
        res = self.solve(self.cache_)
        self.solve_ = res
        self.weights_ = res.weights
        self.group_risks_ = res.group_risks
        self.value_ = res.value
        self.gap_ = res.gap
        self.n_steps_ = res.n_steps
        self.converged_ = res.converged
        return self

    def sample_weight(self, groups, sample_weight=None) -> np.ndarray:
        """Per-row final-fit weights for rows with these group labels (labels must be known groups)."""
        check_is_fitted(self, "weights_")
        return group_sample_weight(groups, self.weights_, self.groups_, self.weight_normalization, sample_weight)

    def fit(self, X, y, groups=None, sample_weight=None) -> MixMax:
        """Estimate the weights, then fit the final estimator with MixMax sample weights.

        Args:
            X: [n, d] numeric features. y: [n] labels (CE) or targets (MSE).
            groups: [n] group labels (default: the ``group_column`` of X, or one group).
            sample_weight: optional [n] nonnegative base row weights; they define the weighted empirical group
                distributions (group models, densities and risks use them) and multiply the final weights.
        """
        self.fit_weights(X, y, groups, sample_weight)
        Xv, yy, _, codes, _, sw = self._prepare(X, y, groups, sample_weight, reset=False)
        w = self.sample_weight(self.groups_[codes], sw if sample_weight is not None else None)
        est = clone(self.final_estimator) if self.final_estimator is not None else self._new_estimator()
        self.estimator_ = fit_weighted(est, Xv, yy, w)
        return self

    def _features(self, X) -> np.ndarray:
        check_is_fitted(self, "estimator_")
        return validate_data(self, X, reset=False, dtype=np.float64)

    @available_if(lambda self: self.loss == "ce")
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of the final model [n, n_classes] (``loss="ce"`` only)."""
        Xv = self._features(X)
        return np.asarray(self.estimator_.predict_proba(Xv))

    def predict(self, X) -> np.ndarray:
        if self.loss == "ce":
            proba = self.predict_proba(X)
            return self.classes_[np.argmax(proba, axis=1)]
        Xv = self._features(X)
        return np.asarray(self.estimator_.predict(Xv), dtype=np.float64)

    def encode_labels(self, y) -> np.ndarray:
        """Class codes of labels y; labels outside ``classes_`` raise ValueError."""
        check_is_fitted(self, "classes_")
        y = check_no_missing(y, "y")
        codes = np.minimum(np.searchsorted(self.classes_, y), len(self.classes_) - 1)
        bad = self.classes_[codes] != y
        if np.any(bad):
            raise ValueError(
                f"labels {np.unique(y[bad]).tolist()[:10]} are outside the estimator's classes {self.classes_.tolist()}"
            )
        return codes
