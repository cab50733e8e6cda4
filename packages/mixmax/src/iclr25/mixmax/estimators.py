"""MixMax for any scikit-learn-style estimator (default XGBoost, as in the official code).

Pipeline (the paper's "E^2 MixMax", where p_g(y|x) and p_g(x) are estimated):

1. fit, per group g, a conditional model p_g(y|x) (classifier with ``predict_proba``; for MSE a regressor
   m_g(x) = E_g[y|x]) and a covariate density p_g(x) (KDE per group, or a classifier density ratio);
2. evaluate every group's model and density ONCE on the risk rows (up to ``max_samples`` per group) and cache them;
   with ``cross_fit=K`` each row is evaluated by models fit on the other K-1 folds, so risks are not measured on
   the rows the models were fit on (the official scripts reuse the training rows);
3. maximise L(lambda) = sum_g lambda_g R_g(f_lambda) by exponentiated-gradient ascent with a duality-gap stop;
4. fit the final estimator with per-row sample weights lambda_g * N / n_g (each group's total weight is
   proportional to lambda_g).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import as_2d_float, check_lengths, encode_groups
from .config import OFFICIAL, MixMaxConfig, XGBDefaults
from .density import ClassifierDensityRatio, GroupKDE
from .objective import RiskCache
from .solvers import MirrorAscentResult, mirror_ascent

__all__ = ["MixMax", "balanced_sample_weight", "erm_sample_weight", "group_sample_weight"]

_D = MixMaxConfig()


def balanced_sample_weight(groups) -> np.ndarray:
    """Group balancing baseline: row weight n_max / n_g, so every group has the same total weight."""
    codes, _ = encode_groups(groups)
    counts = np.bincount(codes)
    return (counts.max() / counts[codes]).astype(np.float64)


def erm_sample_weight(groups) -> np.ndarray:
    """ERM baseline: every row weight 1 (groups weighted by their size)."""
    return np.ones(len(np.asarray(groups)), dtype=np.float64)


def group_sample_weight(groups, weights: np.ndarray, group_labels: np.ndarray | None = None) -> np.ndarray:
    """Row weights lambda_g * N / n_g: each group's total weight is lambda_g * N (mean row weight 1 if all present)."""
    codes, known = encode_groups(groups, group_labels)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (len(known),):
        raise ValueError(f"weights must have one entry per group ({len(known)}), got shape {weights.shape}")
    counts = np.bincount(codes, minlength=len(known)).astype(np.float64)
    return weights[codes] * len(codes) / counts[codes]


def default_estimator(loss: str = "ce"):
    """The official per-group model: XGBoost with n_estimators=200, max_depth=8, learning_rate=0.1."""
    import xgboost as xgb

    d = XGBDefaults()
    if loss == "ce":
        return xgb.XGBClassifier(n_estimators=d.n_estimators, max_depth=d.max_depth, learning_rate=d.learning_rate)
    return xgb.XGBRegressor(n_estimators=d.n_estimators, max_depth=d.max_depth, learning_rate=d.learning_rate)


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


class MixMax:
    """MixMax: group DRO in function space via the optimal data mixture (Thudi & Maddison, ICLR 2025).

    Args:
        estimator: sklearn-style model used for the per-group conditionals and (unless ``final_estimator``) for the
            final weighted fit; cloned. Classifier with ``predict_proba`` for ``loss="ce"``, regressor for "mse".
            Default: XGBoost with the official hyperparameters.
        density: "kde" (Gaussian KDE per group), "classifier" (density ratio P(g|x)/pi_g), or an object with
            ``fit(X, groups, n_groups)`` and ``log_density_matrix(X)``.
        cross_fit: K >= 2 for K-fold cross-fitted risks, or None for the official in-sample (data reuse) risks.
        step_size, max_steps, tol, average: mirror-ascent settings (see :func:`iclr25.mixmax.solvers.mirror_ascent`).
        max_samples: at most this many risk rows per group (official 25000).
        eps: probability clip for CE.
        density_estimator: classifier for ``density="classifier"`` (default a small XGBoost).
        random_state: seeds the fold split and the risk-row subsample.
    Fitted attributes: ``weights_`` [G], ``group_risks_`` [G], ``groups_`` (group labels), ``classes_``, ``gap_``,
    ``n_steps_``, ``converged_``, ``solve_`` (the full :class:`MirrorAscentResult`), ``cache_`` (the cached
    :class:`RiskCache`), ``fold_models_`` (per fold: group conditionals, density, risk rows) and ``estimator_``.
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
        max_samples: int = _D.max_samples,
        eps: float = _D.eps,
        density_estimator=None,
        final_estimator=None,
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        if loss not in ("ce", "mse"):
            raise ValueError(f"loss must be 'ce' or 'mse', got {loss!r}")
        if not (isinstance(density, str) and density in ("kde", "classifier")) and not (
            hasattr(density, "fit") and hasattr(density, "log_density_matrix")
        ):
            raise ValueError(f"density must be 'kde', 'classifier' or a density object, got {density!r}")
        if cross_fit is not None and (int(cross_fit) != cross_fit or cross_fit < 2):
            raise ValueError(f"cross_fit must be None or an integer >= 2, got {cross_fit!r}")
        if int(max_samples) != max_samples or max_samples < 1:
            raise ValueError(f"max_samples must be a positive integer, got {max_samples!r}")
        if not 0 < eps < 1:
            raise ValueError(f"eps must be in (0, 1), got {eps!r}")
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
        self.max_samples = max_samples
        self.eps = eps
        self.density_estimator = density_estimator
        self.final_estimator = final_estimator
        self.random_state = random_state
        self.verbose = verbose

    @classmethod
    def official(cls, estimator=None, **kwargs) -> MixMax:
        """The official tabular preset: in-sample risks, raw-feature KDE, 20 steps of eta = 0.1, last iterate."""
        params = dict(
            cross_fit=None,
            standardize=False,
            step_size=OFFICIAL.step_size,
            max_steps=OFFICIAL.max_steps,
            tol=OFFICIAL.tol,
            average=OFFICIAL.average,
        )
        params.update(kwargs)
        return cls(estimator, **params)

    # ------------------------------------------------------------------ data checks
    def _prepare(self, X, y, groups):
        X = as_2d_float(X)
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D (one target per row), got shape {y.shape}")
        check_lengths(X=X, y=y, groups=np.asarray(groups))
        if len(X) == 0:
            raise ValueError("X has no rows")
        codes, known = encode_groups(groups)
        if self.loss == "ce":
            classes, ycodes = np.unique(y, return_inverse=True)
            if len(classes) < 2:
                raise ValueError(f"y must contain at least 2 classes for loss='ce', got {classes.tolist()}")
            return X, ycodes.astype(np.int64), classes, codes, known
        try:
            yf = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError("loss='mse' needs a numeric y") from exc
        return X, yf, None, codes, known

    # ------------------------------------------------------------------ per-group models
    def _new_estimator(self):
        from sklearn.base import clone

        return clone(self.estimator) if self.estimator is not None else default_estimator(self.loss)

    def _new_density(self):
        if self.density == "kde":
            return GroupKDE(self.bandwidth, standardize=self.standardize)
        if self.density == "classifier":
            return ClassifierDensityRatio(self.density_estimator, eps=self.eps)
        from sklearn.base import clone

        try:
            return clone(self.density)
        except TypeError:
            return self.density

    def _fit_conditional(self, X, y) -> _Conditional:
        if self.loss == "mse":
            return _Conditional(self._new_estimator().fit(X, y), np.zeros(0, np.int64), 0, self.eps, "mse")
        present = np.unique(y)
        if len(present) == 1:
            return _Conditional(None, present, self.n_classes_, self.eps, "ce")
        model = self._new_estimator().fit(X, np.searchsorted(present, y))
        return _Conditional(model, present, self.n_classes_, self.eps, "ce")

    def fit_group_models(self, X, y, codes, rows):
        """Fit the per-group conditionals and the group density on ``rows``; returns (conditionals, density)."""
        G = self.n_groups_
        conds = []
        for g in range(G):
            r = rows[codes[rows] == g]
            if len(r) == 0:
                raise ValueError(f"group {self.groups_[g]!r} has no rows to fit its model on (too few rows per fold?)")
            conds.append(self._fit_conditional(X[r], y[r]))
        dens = self._new_density().fit(X[rows], codes[rows], G)
        return conds, dens

    def evaluate_group_models(self, conds, dens, X, y) -> tuple[np.ndarray, np.ndarray]:
        """Cache entries for rows X: log p_h(x) [n, G] and, per group model h, log p_h(y|x) (CE) or m_h(x) (MSE)."""
        log_px = np.asarray(dens.log_density_matrix(X), dtype=np.float64)
        if self.loss == "ce":
            target = np.stack([c.log_proba(X)[np.arange(len(X)), y] for c in conds], axis=1)
        else:
            target = np.stack([c.predict(X) for c in conds], axis=1)
        return log_px, target

    def plan_folds(self, codes: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(train rows, risk rows) per fold. Risk rows: up to ``max_samples`` random rows per group."""
        rng = np.random.default_rng(self.random_state)
        n = len(codes)
        K = self.cross_fit
        fold = np.zeros(n, dtype=np.int64)
        risk = np.zeros(n, dtype=bool)
        for g in range(self.n_groups_):
            idx = rng.permutation(np.flatnonzero(codes == g))
            if K is not None and len(idx) < K:
                raise ValueError(f"group {self.groups_[g]!r} has {len(idx)} rows, fewer than cross_fit={K} folds")
            risk[idx[: self.max_samples]] = True
            if K is not None:
                fold[idx] = np.arange(len(idx)) % K
        all_rows = np.arange(n)
        if K is None:
            return [(all_rows, np.flatnonzero(risk))]
        return [(np.flatnonzero(fold != k), np.flatnonzero((fold == k) & risk)) for k in range(K)]

    def build_cache(self, X, y, groups) -> RiskCache:
        """Fit the group models (per fold) and evaluate them once on the risk rows."""
        X, y, classes, codes, known = self._prepare(X, y, groups)
        self.groups_, self.classes_, self.n_groups_ = known, classes, len(known)
        self.n_classes_ = 0 if classes is None else len(classes)
        folds = self.plan_folds(codes)
        parts, self.fold_models_ = [], []
        if self.verbose:
            from iclr25.shared import progress

            folds_iter = progress(folds, desc="MixMax group models", unit="fold")
        else:
            folds_iter = folds
        for train, risk in folds_iter:
            conds, dens = self.fit_group_models(X, y, codes, train)
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
        )

    def solve(self, cache: RiskCache) -> MirrorAscentResult:
        return mirror_ascent(
            cache.risks,
            cache.n_groups,
            step_size=self.step_size,
            max_steps=self.max_steps,
            tol=self.tol,
            average=self.average,
        )

    # ------------------------------------------------------------------ public API
    def fit_weights(self, X, y, groups) -> MixMax:
        """Estimate the MixMax mixture weights (sets ``weights_``, ``group_risks_``, ...) without the final fit."""
        self.cache_ = self.build_cache(X, y, groups)
        res = self.solve(self.cache_)
        self.solve_ = res
        self.weights_ = res.weights
        self.group_risks_ = res.group_risks
        self.value_ = res.value
        self.gap_ = res.gap
        self.n_steps_ = res.n_steps
        self.converged_ = res.converged
        return self

    def sample_weight(self, groups) -> np.ndarray:
        """Per-row weights lambda_g * N / n_g for rows with these group labels (labels must be known groups)."""
        self._check_fitted("weights_")
        return group_sample_weight(groups, self.weights_, self.groups_)

    def fit(self, X, y, groups) -> MixMax:
        """Estimate the weights, then fit the final estimator with MixMax sample weights."""
        self.fit_weights(X, y, groups)
        X, yy, _, _, _ = self._prepare(X, y, groups)
        from sklearn.base import clone

        est = clone(self.final_estimator) if self.final_estimator is not None else self._new_estimator()
        self.estimator_ = est.fit(X, yy, sample_weight=self.sample_weight(groups))
        return self

    def _check_fitted(self, attr: str = "estimator_") -> None:
        if not hasattr(self, attr):
            raise ValueError(f"MixMax is not fitted ({attr} missing): call fit(X, y, groups) first")

    def predict_proba(self, X) -> np.ndarray:
        self._check_fitted()
        if self.loss != "ce":
            raise ValueError("predict_proba needs loss='ce'")
        return np.asarray(self.estimator_.predict_proba(as_2d_float(X)))

    def predict(self, X) -> np.ndarray:
        self._check_fitted()
        if self.loss == "ce":
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        return np.asarray(self.estimator_.predict(as_2d_float(X)), dtype=np.float64)

    def encode_labels(self, y) -> np.ndarray:
        """Class codes of labels y; labels outside ``classes_`` raise ValueError."""
        self._check_fitted("classes_")
        y = np.asarray(y)
        codes = np.clip(np.searchsorted(self.classes_, y), 0, len(self.classes_) - 1)
        bad = self.classes_[codes] != y
        if np.any(bad):
            raise ValueError(
                f"labels {np.unique(y[bad]).tolist()[:10]} are outside the estimator's classes {self.classes_.tolist()}"
            )
        return codes
