"""The MixMax objective, all in log space.

For groups g = 1..G with joint distributions p_g(x, y) and mixture weights lambda on the simplex, the
Bayes-optimal predictor of the lambda-mixture under cross-entropy (CE) is

    f_lambda(y|x) = sum_g lambda_g p_g(x) p_g(y|x) / sum_g lambda_g p_g(x),

and under mean squared error (MSE) it is f_lambda(x) = sum_g lambda_g p_g(x) m_g(x) / sum_g lambda_g p_g(x) with
m_g(x) = E_g[y|x]. The objective L(lambda) = sum_g lambda_g R_g(f_lambda) is concave in lambda and, by Danskin's
theorem, its gradient is the vector of per-group risks R_g(f_lambda). Maximising it over the simplex solves group DRO
in function space (the paper's minimax theorem).

We compute f_lambda with log-sum-exp over groups, so no density ever underflows (the official scripts work in
probability space and fall back to sum_g lambda_g p_g(y|x) when all densities underflow to 0). Cross-entropy is
clipped at -log(eps) instead of dropping infinite losses (the official scripts drop them, which biases risks low).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "RiskCache",
    "mixture_log_posterior",
    "mixture_mean",
    "discrete_predictor",
    "discrete_group_risks",
    "discrete_objective",
    "check_pmf_table",
]


def _log(lam: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(lam, dtype=np.float64))


def _lse_rows(a: np.ndarray) -> np.ndarray:
    """Row-wise logsumexp of a 2-D array (a lean version of scipy's, for the hot loop)."""
    m = a.max(axis=1)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return m + np.log(np.exp(a - m[:, None]).sum(axis=1))


def mixture_log_posterior(lam: np.ndarray, log_px: np.ndarray, log_pyx: np.ndarray) -> np.ndarray:
    """log f_lambda(y|x) = lse_g(log lam_g + log p_g(x) + log p_g(y|x)) - lse_g(log lam_g + log p_g(x)).

    Args:
        lam: weights [G] on the simplex.
        log_px: log p_g(x_i) [N, G]; any per-row constant may be added (it cancels), e.g. log density ratios.
        log_pyx: log p_g(y|x_i), either [N, G, C] (all classes) or [N, G] (one label per row).
    Returns:
        [N, C] or [N] log-probabilities of the mixture predictor.
    """
    log_lam = _log(lam)
    a = log_lam[None, :] + log_px  # [N, G]
    denom = logsumexp(a, axis=1)  # [N]
    if log_pyx.ndim == 3:
        return logsumexp(a[:, :, None] + log_pyx, axis=1) - denom[:, None]
    return logsumexp(a + log_pyx, axis=1) - denom


def mixture_mean(lam: np.ndarray, log_px: np.ndarray, means: np.ndarray) -> np.ndarray:
    """MSE mixture predictor f_lambda(x_i) = sum_g softmax_g(log lam_g + log p_g(x_i)) m_g(x_i); means [N, G]."""
    a = _log(lam)[None, :] + log_px
    w = np.exp(a - logsumexp(a, axis=1, keepdims=True))
    return np.sum(w * means, axis=1)


@dataclass
class RiskCache:
    """Everything the lambda-solve needs, computed once: lambda does not change densities or group predictions.

    Attributes:
        groups: group code of each evaluation row [N] (ints in 0..G-1).
        log_px: log p_h(x_i) for every group h [N, G] (up to a per-row constant).
        target: CE: log p_h(y_i|x_i) of the row's observed label under each group's model [N, G];
            MSE: the group models' predictions m_h(x_i) [N, G].
        y: MSE only: the observed targets [N].
        loss: "ce" or "mse".
        eps: CE clipping: per-row loss is -log(max(f, eps)).
        weights: optional nonnegative row weights [N]; risks are then weighted means within each group.
    """

    groups: np.ndarray
    log_px: np.ndarray
    target: np.ndarray
    n_groups: int
    loss: str = "ce"
    y: np.ndarray | None = None
    eps: float = 1e-6
    weights: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.loss not in ("ce", "mse"):
            raise ValueError(f"loss must be 'ce' or 'mse', got {self.loss!r}")
        n = len(self.groups)
        if self.log_px.shape != (n, self.n_groups) or self.target.shape != (n, self.n_groups):
            raise ValueError(
                f"log_px and target must have shape {(n, self.n_groups)}, got {self.log_px.shape}, {self.target.shape}"
            )
        if self.loss == "mse" and (self.y is None or len(self.y) != n):
            raise ValueError("loss='mse' needs y with one target per evaluation row")
        if self.weights is not None and (self.weights.shape != (n,) or np.any(~(self.weights >= 0))):
            raise ValueError(f"weights must be {n} nonnegative row weights")
        self.counts = np.bincount(self.groups, weights=self.weights, minlength=self.n_groups).astype(np.float64)
        self._joint = self.log_px + self.target if self.loss == "ce" else None  # log p_h(x) + log p_h(y|x)
        if np.any(self.counts == 0):
            raise ValueError(f"every group needs at least one evaluation row, got counts {self.counts.tolist()}")

    def own_group_margin(self) -> np.ndarray:
        """Per row: log p_own(x) - logsumexp_{h != own} log p_h(x), in nats (+inf for a single group).

        When this margin is large for (nearly) every row, the groups are separable in x: f_lambda(y|x) is the
        row's own group model for every interior lambda, the risks do not depend on lambda, L is linear and its
        maximiser is a vertex (the hardest group) although every interior lambda gives the same f_lambda.
        """
        n = len(self.groups)
        own = self.log_px[np.arange(n), self.groups]
        others = np.where(np.eye(self.n_groups, dtype=bool)[self.groups], -np.inf, self.log_px)
        return own - _lse_rows(others)

    def row_losses(self, lam: np.ndarray) -> np.ndarray:
        """Per-row loss of f_lambda [N]."""
        if self.loss == "ce":
            log_lam = _log(lam)[None, :]
            logf = _lse_rows(log_lam + self._joint) - _lse_rows(log_lam + self.log_px)
            return -np.maximum(logf, np.log(self.eps))
        return (self.y - mixture_mean(lam, self.log_px, self.target)) ** 2

    def risks(self, lam: np.ndarray) -> np.ndarray:
        """Per-group risks R_g(f_lambda) [G]: the gradient of the MixMax objective."""
        loss = self.row_losses(lam)
        if self.weights is not None:
            loss = loss * self.weights
        return np.bincount(self.groups, weights=loss, minlength=self.n_groups) / self.counts


# ----------------------------------------------------------------------------------------------- discrete tables


def check_pmf_table(P: np.ndarray, atol: float = 1e-6) -> np.ndarray:
    """Validate a table P [G, X, Y] of joint pmfs (each P[g] nonnegative, summing to 1)."""
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 3:
        raise ValueError(f"P must be an array [G, X, Y] of joint pmfs, got shape {P.shape}")
    if not np.all(np.isfinite(P)) or np.any(P < 0):
        raise ValueError("P must be finite and nonnegative (each P[g] is a joint pmf over (x, y))")
    sums = P.reshape(P.shape[0], -1).sum(axis=1)
    if not np.allclose(sums, 1.0, atol=atol):
        raise ValueError(f"each P[g] must sum to 1 (a joint pmf over (x, y)); got sums {np.round(sums, 6).tolist()}")
    return P


def discrete_predictor(lam: np.ndarray, P: np.ndarray, loss: str = "ce", y_values: np.ndarray | None = None):
    """Bayes predictor of the lambda-mixture: CE f(y|x) [X, Y]; MSE f(x) = E[y|x] [X].

    Where the mixture puts no mass on x, the predictor is taken from the uniform mixture (it affects no risk of a
    group with positive weight).
    """
    lam = np.asarray(lam, dtype=np.float64)
    pxy = np.einsum("g,gxy->xy", lam, P)
    fallback = P.sum(axis=0)
    px = pxy.sum(axis=1, keepdims=True)
    empty = px[:, 0] <= 0
    pxy = np.where(empty[:, None], fallback, pxy)
    px = pxy.sum(axis=1, keepdims=True)
    px = np.where(px > 0, px, 1.0)
    cond = pxy / px
    cond[empty & (fallback.sum(axis=1) <= 0)] = 1.0 / P.shape[2]
    if loss == "ce":
        return cond
    if loss == "mse":
        return cond @ _y_values(P, y_values)
    raise ValueError(f"loss must be 'ce' or 'mse', got {loss!r}")


def _y_values(P: np.ndarray, y_values: np.ndarray | None) -> np.ndarray:
    if y_values is None:
        raise ValueError("loss='mse' needs y_values: the numeric value of each label column of P")
    v = np.asarray(y_values, dtype=np.float64)
    if v.shape != (P.shape[2],):
        raise ValueError(f"y_values must have one value per label column of P ({P.shape[2]}), got shape {v.shape}")
    return v


def discrete_group_risks(f: np.ndarray, P: np.ndarray, loss: str = "ce", y_values=None) -> np.ndarray:
    """R_g(f) [G] for a predictor f (CE: [X, Y] conditional pmf; MSE: [X] real)."""
    if loss == "ce":
        with np.errstate(divide="ignore"):
            logf = np.log(np.maximum(f, 1e-300))
        return -np.einsum("gxy,xy->g", P, logf)
    v = _y_values(P, y_values)
    return np.einsum("gxy,xy->g", P, (v[None, :] - f[:, None]) ** 2)


def discrete_objective(lam: np.ndarray, P: np.ndarray, loss: str = "ce", y_values=None) -> float:
    """L(lambda) = sum_g lambda_g R_g(f_lambda) (CE: the conditional entropy H(Y|X) of the mixture)."""
    f = discrete_predictor(lam, P, loss, y_values)
    return float(np.dot(lam, discrete_group_risks(f, P, loss, y_values)))
