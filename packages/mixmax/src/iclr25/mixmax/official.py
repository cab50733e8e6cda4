"""The official per-step loop, kept as a baseline for benchmarks and as an equivalence oracle for caching.

The official tabular scripts recompute, at every mirror-ascent step, every group's density and conditional model on
the risk rows (probability space, with an underflow fallback). Their outputs do not depend on lambda, so
:class:`iclr25.mixmax.MixMax` computes them once. :func:`recompute_solve` runs the same update while re-evaluating
the group models at every step (in log space, so it returns exactly the cached solve's lambda); the ratio of the two
wall times is the speed-up of caching.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .estimators import MixMax
from .objective import RiskCache

__all__ = ["recompute_solve"]


def recompute_solve(mm: MixMax, fitted: list, X: np.ndarray, y: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Mirror ascent with mm's settings (fixed ``mm.max_steps`` steps, no stopping rule, as in the official loop),
    re-evaluating every fold's group models on its risk rows at each step.

    Args:
        mm: a MixMax whose ``build_cache`` or ``fit_weights`` has run (for groups/classes), with the settings to use.
        fitted: per fold ``(conds, dens, risk_rows)`` as returned by ``mm.fit_group_models`` plus the rows.
        X, y, codes: features, label codes (CE) or targets (MSE), group codes.
    Returns:
        lambda after ``mm.max_steps`` steps.
    """
    G = mm.n_groups_
    log_lam = np.full(G, -np.log(G))
    for _ in range(mm.max_steps):
        parts = [(rows, *mm.evaluate_group_models(conds, dens, X[rows], y[rows])) for conds, dens, rows in fitted]
        rows = np.concatenate([p[0] for p in parts])
        cache = RiskCache(
            codes[rows],
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            G,
            mm.loss,
            None if mm.loss == "ce" else y[rows],
            mm.eps,
        )
        risks = cache.risks(np.exp(log_lam))
        log_lam = log_lam + mm.step_size * (risks - mm.entropy * log_lam if mm.entropy else risks)
        log_lam -= logsumexp(log_lam)
    return np.exp(log_lam)
