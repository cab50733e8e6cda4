"""Solvers for max_{lambda in simplex} L(lambda).

* :func:`mirror_ascent` - exponentiated-gradient ascent (the official update), with a duality-gap stopping rule:
  for any lambda, L(lambda) <= max_lambda L = min_f max_g R_g(f) <= max_g R_g(f_lambda), so
  gap(lambda) = max_g R_g(f_lambda) - L(lambda) bounds the suboptimality of both lambda and f_lambda.
* :func:`solve_discrete` - exact solve for discrete distributions P [G, X, Y] with cvxpy (or by mirror ascent).
* :func:`group_dro_discrete` - the independent direct solve min_q max_g R_g(q) (function-space group DRO), used as
  an oracle: by the paper's minimax theorem its value equals max_lambda L(lambda).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from .config import MirrorAscentConfig
from .objective import _y_values, check_pmf_table, discrete_group_risks, discrete_predictor

__all__ = ["MirrorAscentResult", "mirror_ascent", "DiscreteSolution", "solve_discrete", "group_dro_discrete"]


@dataclass
class MirrorAscentResult:
    weights: np.ndarray  # lambda [G]
    value: float  # L(lambda) = <lambda, R(lambda)>
    group_risks: np.ndarray  # R_g(f_lambda) [G]
    gap: float  # max_g R_g - L(lambda) >= 0
    n_steps: int  # number of updates taken
    converged: bool  # gap <= tol was reached
    history: dict[str, list] = field(default_factory=dict)  # per evaluated iterate: "value", "gap", "weights"


def _check_step(step_size: float, max_steps: int, tol: float | None) -> None:
    if not (np.isfinite(step_size) and step_size > 0):
        raise ValueError(f"step_size must be a positive finite float, got {step_size!r}")
    if int(max_steps) != max_steps or max_steps < 0:
        raise ValueError(f"max_steps must be a nonnegative integer, got {max_steps!r}")
    if tol is not None and not tol >= 0:
        raise ValueError(f"tol must be None or >= 0, got {tol!r}")


def _value_gap(lam: np.ndarray, risks: np.ndarray, log_lam: np.ndarray, entropy: float) -> tuple[float, float]:
    """(L(lambda) + tau H(lambda), Frank-Wolfe gap of that objective)."""
    if not entropy:
        value = float(lam @ risks)
        return value, float(risks.max() - value)
    safe = np.where(lam > 0, log_lam, 0.0)
    d = risks - entropy * safe
    return float(lam @ risks - entropy * (lam @ safe)), float(d.max() - lam @ d)


def mirror_ascent(
    risk_fn: Callable[[np.ndarray], np.ndarray],
    n_groups: int,
    *,
    step_size: float = MirrorAscentConfig.step_size,
    max_steps: int = MirrorAscentConfig.max_steps,
    tol: float | None = MirrorAscentConfig.tol,
    average: bool = False,
    entropy: float = 0.0,
    init: np.ndarray | None = None,
    callback: Callable[[int, np.ndarray, np.ndarray], None] | None = None,
) -> MirrorAscentResult:
    """Maximise L(lambda) + entropy * H(lambda) over the simplex given risk_fn(lambda) = R(lambda) = grad L.

    ``entropy`` = tau >= 0 adds tau * H(lambda), H(lambda) = -sum_g lambda_g log lambda_g (0: the paper's problem).
    The gradient becomes R_g - tau (log lambda_g + 1); when f_lambda does not depend on lambda the maximiser is
    softmax(R / tau), so tau interpolates between MixMax (tau -> 0) and uniform group weights (tau -> inf). The
    reported ``gap`` is the Frank-Wolfe gap of the regularised objective, max_g D_g - <lambda, D> with
    D = R - tau log lambda (for tau = 0: max_g R_g - L(lambda)). It is an *empirical* gap: it is computed from the
    estimated risks, so it certifies optimality of the estimated problem only, not of the population problem.

    Update (in log space, so weights never underflow to exactly 0): log lambda <- log lambda + eta R;
    log lambda <- log lambda - logsumexp(log lambda). Starts at ``init`` (default uniform). Stops when the duality
    gap max_g R_g - <lambda, R> <= tol, or after ``max_steps`` updates. With ``average`` the returned lambda is the
    running average of the iterates (its risks are re-evaluated). The official preset is
    ``step_size=0.1, max_steps=20, tol=None`` (:data:`iclr25.mixmax.config.OFFICIAL`).
    """
    _check_step(step_size, max_steps, tol)
    if not (np.isfinite(entropy) and entropy >= 0):
        raise ValueError(f"entropy must be a finite float >= 0, got {entropy!r}")
    if entropy * step_size >= 1:
        raise ValueError(f"entropy * step_size must be < 1 for the update to contract, got {entropy * step_size}")
    if n_groups < 1:
        raise ValueError(f"n_groups must be >= 1, got {n_groups}")
    if init is None:
        log_lam = np.full(n_groups, -np.log(n_groups))
    else:
        init = np.asarray(init, dtype=np.float64)
        if init.shape != (n_groups,) or np.any(init < 0) or not np.isclose(init.sum(), 1.0):
            raise ValueError(f"init must be a point of the simplex with {n_groups} entries")
        with np.errstate(divide="ignore"):
            log_lam = np.log(init)
    history: dict[str, list] = {"value": [], "gap": [], "weights": []}
    avg = np.zeros(n_groups)
    steps = 0
    converged = False
    while True:
        lam = np.exp(log_lam)
        risks = np.asarray(risk_fn(lam), dtype=np.float64)
        if risks.shape != (n_groups,) or not np.all(np.isfinite(risks)):
            raise ValueError(f"risk_fn must return {n_groups} finite risks, got {risks}")
        value, gap = _value_gap(lam, risks, log_lam, entropy)
        history["value"].append(value)
        history["gap"].append(gap)
        history["weights"].append(lam.copy())
        if callback is not None:
            callback(steps, lam, risks)
        avg += (lam - avg) / (steps + 1)
        if tol is not None and gap <= tol:
            converged = True
            break
        if steps >= max_steps:
            break
        log_lam = log_lam + step_size * (risks - entropy * log_lam) if entropy else log_lam + step_size * risks
        log_lam = log_lam - logsumexp(log_lam)
        steps += 1
    if average:
        lam = avg / avg.sum()
        risks = np.asarray(risk_fn(lam), dtype=np.float64)
        with np.errstate(divide="ignore"):
            value, gap = _value_gap(lam, risks, np.log(lam), entropy)
        converged = tol is not None and gap <= tol
    return MirrorAscentResult(lam, value, risks, gap, steps, converged, history)


@dataclass
class DiscreteSolution:
    weights: np.ndarray  # lambda* [G]
    value: float  # L(lambda*)
    group_risks: np.ndarray  # R_g(f_lambda*) [G]
    predictor: np.ndarray  # f_lambda*: CE [X, Y] conditional pmf, MSE [X] conditional mean
    gap: float  # max_g R_g - L(lambda*)
    method: str
    n_steps: int = 0


_TIGHT = dict(tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, tol_ktratio=1e-10)


def _solve(prob) -> None:
    """Solve with Clarabel at tight tolerances (weights to ~1e-9); fall back to cvxpy's default solver."""
    import cvxpy as cp

    try:
        with warnings.catch_warnings():  # "solution may be inaccurate" at 1e-12 tolerances: still the best iterate
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=cp.CLARABEL, **_TIGHT)
    except cp.error.SolverError:
        prob.solve()
    if prob.status not in ("optimal", "optimal_inaccurate"):
        prob.solve()


def _cvxpy_objective(P: np.ndarray, lam, loss: str, y_values):
    import cvxpy as cp

    G, X, Y = P.shape
    if loss == "ce":
        # conditional entropy of the mixture: -sum_{x,y} p(x,y) log(p(x,y)/p(x)) = -sum rel_entr(p(x,y), p(x))
        pxy = P.reshape(G, X * Y).T @ lam
        px = np.repeat(P.sum(axis=2), Y, axis=1).T @ lam
        return -cp.sum(cp.rel_entr(pxy, px))
    v = _y_values(P, y_values)
    # E[y^2] - sum_x (sum_y p(x,y) y)^2 / p(x): quad-over-lin is jointly convex, so this is concave
    ey2 = (P @ (v**2)).sum(axis=1) @ lam
    num = P @ v  # [G, X]
    den = P.sum(axis=2)  # [G, X]
    keep = den.sum(axis=0) > 0
    return ey2 - sum(cp.quad_over_lin(num[:, x] @ lam, den[:, x] @ lam) for x in np.flatnonzero(keep))


def solve_discrete(
    P: np.ndarray,
    loss: str = "ce",
    y_values: np.ndarray | None = None,
    *,
    method: str = "cvxpy",
    tol: float = 1e-9,
    step_size: float = 1.0,
    max_steps: int = 200_000,
) -> DiscreteSolution:
    """Exact MixMax weights for discrete distributions.

    Args:
        P: [G, X, Y], each P[g] a joint pmf over (x, y).
        loss: "ce" (labels are the Y columns) or "mse" (then ``y_values`` [Y] gives each column's numeric value).
        method: "cvxpy" (exponential-cone / SOC program, solved by Clarabel) or "mirror" (exponentiated gradient on
            the exact risks until the duality gap is <= ``tol``).
    """
    P = check_pmf_table(P)
    if loss not in ("ce", "mse"):
        raise ValueError(f"loss must be 'ce' or 'mse', got {loss!r}")
    if loss == "mse":
        _y_values(P, y_values)
    G = P.shape[0]

    def risks(lam: np.ndarray) -> np.ndarray:
        return discrete_group_risks(discrete_predictor(lam, P, loss, y_values), P, loss, y_values)

    n_steps = 0
    if method == "cvxpy":
        import cvxpy as cp

        lam = cp.Variable(G, nonneg=True)
        prob = cp.Problem(cp.Maximize(_cvxpy_objective(P, lam, loss, y_values)), [cp.sum(lam) == 1])
        _solve(prob)
        if lam.value is None or prob.status not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"cvxpy failed to solve the MixMax program (status {prob.status})")
        w = np.clip(np.asarray(lam.value, dtype=np.float64), 0.0, None)
        w = w / w.sum()
    elif method == "mirror":
        res = mirror_ascent(risks, G, step_size=step_size, max_steps=max_steps, tol=tol)
        w, n_steps = res.weights, res.n_steps
    else:
        raise ValueError(f"method must be 'cvxpy' or 'mirror', got {method!r}")
    r = risks(w)
    value = float(w @ r)
    return DiscreteSolution(
        w, value, r, discrete_predictor(w, P, loss, y_values), float(r.max() - value), method, n_steps
    )


def group_dro_discrete(P: np.ndarray, loss: str = "ce", y_values: np.ndarray | None = None):
    """Direct function-space group DRO: min_{q, t} t s.t. R_g(q) <= t for every g.

    CE: q [X, Y] is a conditional pmf (rows on the simplex); MSE: q [X] is real. Returns (value, q). This solve
    never forms a mixture, so it is an independent oracle for :func:`solve_discrete`.
    """
    import cvxpy as cp

    P = check_pmf_table(P)
    G, X, Y = P.shape
    t = cp.Variable()
    if loss == "ce":
        q = cp.Variable((X, Y), nonneg=True)
        cons = [cp.sum(q, axis=1) == 1]
        cons += [-cp.sum(cp.multiply(P[g], cp.log(q))) <= t for g in range(G)]
    elif loss == "mse":
        v = _y_values(P, y_values)
        q = cp.Variable(X)
        # R_g(q) = sum_x [sum_y P(x,y) y^2 - 2 q_x sum_y P(x,y) y + q_x^2 sum_y P(x,y)]
        cons = [
            P[g] @ v**2 @ np.ones(X) - 2 * (P[g] @ v) @ q + cp.sum(cp.multiply(P[g].sum(axis=1), cp.square(q))) <= t
            for g in range(G)
        ]
    else:
        raise ValueError(f"loss must be 'ce' or 'mse', got {loss!r}")
    prob = cp.Problem(cp.Minimize(t), cons)
    _solve(prob)
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"cvxpy failed on the direct group DRO program (status {prob.status})")
    return float(t.value), np.asarray(q.value)
