"""Density estimators for the per-group covariate densities p_g(x).

* :class:`GaussianKDE` - a Gaussian KDE normalised exactly like ``sklearn.neighbors.KernelDensity.score_samples``
  (bandwidth "scott" h = n^(-1/(d+4)), "silverman" h = (n (d+2) / 4)^(-1/(d+4)), or a float), computed in torch
  (chunked) or by the fused Triton kernel.
* :class:`GroupKDE` - one KDE per group (the official choice), on features standardised by ONE global scaler (the
  Jacobian of a common affine map is the same for every group, so it cancels in f_lambda).
* :class:`ClassifierDensityRatio` - p_g(x) / p(x) = P(g|x) / pi_g from any probabilistic classifier of the group.
  The unknown p(x) is common to all groups and cancels in f_lambda; robust for high-dimensional or discrete features.

Both group estimators expose ``fit(X, groups, n_groups)`` and ``log_density_matrix(X) -> [N, G]`` (log p_g(x) up to a
per-row constant).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._validation import as_2d_float, check_sample_weight
from .kernels import kde_log_density

__all__ = ["GaussianKDE", "GroupKDE", "ClassifierDensityRatio", "bandwidth_rule"]


def bandwidth_rule(bandwidth: str | float, n: int, d: int) -> float:
    """sklearn's rules of thumb (no data scaling): scott n^(-1/(d+4)), silverman (n (d+2)/4)^(-1/(d+4))."""
    if isinstance(bandwidth, str):
        if bandwidth == "scott":
            return n ** (-1.0 / (d + 4))
        if bandwidth == "silverman":
            return (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))
        raise ValueError(f"bandwidth must be 'scott', 'silverman' or a positive float, got {bandwidth!r}")
    h = float(bandwidth)
    if not (math.isfinite(h) and h > 0):
        raise ValueError(f"bandwidth must be a positive finite float, got {bandwidth!r}")
    return h


class GaussianKDE:
    """Gaussian kernel density estimate; ``log_density`` equals sklearn's ``score_samples``.

    Args:
        bandwidth: "scott" | "silverman" | float.
        backend: "auto" (Triton on CUDA tensors, torch otherwise) | "torch" | "triton".
        dtype: torch dtype for numpy inputs (float64 matches sklearn to ~1e-12; the Triton kernel computes in fp32).
        device: device for numpy inputs (e.g. "cuda").
    """

    def __init__(self, bandwidth: str | float = "scott", backend: str = "auto", dtype=torch.float64, device=None):
        bandwidth_rule(bandwidth, 1, 1)  # validate early
        if backend not in ("auto", "torch", "triton"):
            raise ValueError(f"backend must be 'auto', 'torch' or 'triton', got {backend!r}")
        self.bandwidth = bandwidth
        self.backend = backend
        self.dtype = dtype
        self.device = device

    def _tensor(self, X, name: str) -> torch.Tensor:
        if isinstance(X, torch.Tensor):
            if X.ndim != 2:
                raise ValueError(f"{name} must be 2-D [n_samples, n_features], got shape {tuple(X.shape)}")
            return X
        return torch.as_tensor(as_2d_float(X, name), dtype=self.dtype, device=self.device)

    def fit(self, X, sample_weight=None) -> GaussianKDE:
        """Fit on rows X; optional nonnegative ``sample_weight`` (rows of weight 0 are left out, and the rules of
        thumb count the rows of positive weight). A weighted KDE runs on the torch backend."""
        t = self._tensor(X, "X")
        if t.shape[0] == 0:
            raise ValueError("GaussianKDE.fit needs at least one row")
        if not t.is_floating_point():
            raise TypeError(f"X must be a floating-point tensor, got {t.dtype}; convert it first")
        self.log_weights_ = None
        if sample_weight is not None:
            w = check_sample_weight(sample_weight, t.shape[0])
            keep = w > 0
            t = t[torch.as_tensor(keep, device=t.device)]
            w = w[keep]
            if not np.allclose(w, w[0]):
                self.log_weights_ = torch.as_tensor(np.log(w / w.sum()), dtype=t.dtype, device=t.device)
        self.train_ = t.detach()
        self.n_, self.d_ = t.shape
        self.bandwidth_ = bandwidth_rule(self.bandwidth, self.n_, self.d_)
        return self

    def log_density(self, X):
        """log p(x) for each row of X; numpy in -> numpy out, tensor in -> tensor out."""
        if not hasattr(self, "train_"):
            raise ValueError("GaussianKDE is not fitted: call fit(X) first")
        is_tensor = isinstance(X, torch.Tensor)
        q = self._tensor(X, "X")
        if q.shape[1] != self.d_:
            raise ValueError(f"X has {q.shape[1]} features, the KDE was fitted on {self.d_}")
        train = self.train_.to(device=q.device, dtype=q.dtype)
        lw = None if self.log_weights_ is None else self.log_weights_.to(device=q.device, dtype=q.dtype)
        out = kde_log_density(q, train, self.bandwidth_, backend=self.backend, log_weights=lw)
        return out if is_tensor else out.detach().cpu().numpy().astype(np.float64)

    score_samples = log_density


class GroupKDE:
    """One :class:`GaussianKDE` per group on globally standardised features (official: raw features).

    ``backend``/``device``/``dtype`` go to every :class:`GaussianKDE`: e.g. ``device="cuda"`` runs the fused Triton
    kernel (fp32) with ``backend="auto"``; on CPU the chunked float64 torch path is used.
    """

    def __init__(
        self,
        bandwidth: str | float = "scott",
        standardize: bool = True,
        backend: str = "auto",
        device=None,
        dtype=torch.float64,
    ):
        self.bandwidth = bandwidth
        self.standardize = standardize
        self.backend = backend
        self.device = device
        self.dtype = dtype

    def _scale(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) / self.scale_ if self.standardize else X

    def fit(self, X, groups: np.ndarray, n_groups: int, sample_weight=None) -> GroupKDE:
        X = as_2d_float(X)
        w = check_sample_weight(sample_weight, len(X))
        self.mean_ = np.average(X, axis=0, weights=w)
        sd = np.sqrt(np.average((X - self.mean_) ** 2, axis=0, weights=w))
        self.scale_ = np.where(sd > 0, sd, 1.0)
        Z = self._scale(X)
        self.kdes_ = []
        for g in range(n_groups):
            sel = (groups == g) & (w > 0)
            if not np.any(sel):
                raise ValueError(f"group {g} has no rows (of positive weight) to fit its density on")
            kde = GaussianKDE(self.bandwidth, backend=self.backend, dtype=self.dtype, device=self.device)
            self.kdes_.append(kde.fit(Z[sel], None if sample_weight is None else w[sel]))
        return self

    def log_density_matrix(self, X) -> np.ndarray:
        Z = self._scale(as_2d_float(X))
        return np.stack([k.log_density(Z) for k in self.kdes_], axis=1)


class ClassifierDensityRatio:
    """log p_g(x) - log p(x) = log P(g|x) - log pi_g, from a probabilistic classifier of the group label.

    Args:
        estimator: sklearn-style classifier with ``predict_proba`` (cloned); default a small XGBoost classifier.
        eps: probabilities are clipped at eps before the log.
    """

    def __init__(self, estimator=None, eps: float = 1e-6):
        self.estimator = estimator
        self.eps = eps

    def fit(self, X, groups: np.ndarray, n_groups: int, sample_weight=None) -> ClassifierDensityRatio:
        from sklearn.base import clone

        X = as_2d_float(X)
        w = check_sample_weight(sample_weight, len(X))
        counts = np.bincount(groups, weights=w, minlength=n_groups)
        if np.any(counts == 0):
            raise ValueError(f"every group needs rows to fit the group classifier, got counts {counts.tolist()}")
        if n_groups == 1:
            self.model_ = None
        else:
            if self.estimator is None:
                from xgboost import XGBClassifier

                est = XGBClassifier(n_estimators=100, max_depth=4, learning_rate=0.1, n_jobs=None)
            else:
                est = clone(self.estimator)
            self.model_ = est.fit(X, groups) if sample_weight is None else est.fit(X, groups, sample_weight=w)
        self.log_prior_ = np.log(counts / counts.sum())
        self.n_groups_ = n_groups
        return self

    def log_density_matrix(self, X) -> np.ndarray:
        X = as_2d_float(X)
        if self.model_ is None:
            return np.zeros((len(X), 1))
        proba = np.asarray(self.model_.predict_proba(X), dtype=np.float64)
        if proba.shape[1] != self.n_groups_:
            raise ValueError(f"the group classifier returned {proba.shape[1]} columns, expected {self.n_groups_}")
        return np.log(np.clip(proba, self.eps, 1.0)) - self.log_prior_[None, :]
