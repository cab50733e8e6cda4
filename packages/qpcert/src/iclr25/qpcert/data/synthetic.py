"""Synthetic graphs with known ground truth, reproducing the official random-number order (same seed, same graph).

CSBM (contextual stochastic block model, two classes): ``numpy.random.Generator(PCG64(seed))``; labels
``integers(0, 2, n)``; class-0 then class-1 features ``multivariate_normal(-+mu, sigma^2 I)`` cast to float32;
edges ``binomial(1, P)`` on the strict upper triangle (P_ij = p within, q between classes), then A += A^T; finally
nodes sorted by class with ``np.argsort(y)`` (the official ``get_graph(sort=True)``).
d = round(n / ln(n)^2), mu = K sigma / (2 sqrt(d)) * 1, p = 2 a_in / (n - 1), q = 2 a_out / (n - 1).

CBA (contextual Barabasi-Albert with communities): legacy ``RandomState(seed)`` stream (the official code calls
``np.random.seed``; we use a private RandomState with the same stream and leave the global state alone).
"""

from __future__ import annotations

import math

import numpy as np

from ..config import CSBMConfig
from .graphs import Graph


def _feature_params(n: int, K: float, sigma: float):
    d = round(n / math.log(n) ** 2)
    mu = np.full(d, K * sigma / (2 * d**0.5), dtype=np.float32)
    cov = sigma**2 * np.identity(d, dtype=np.float32)
    return d, mu, cov


def _sort_by_class(x, a, y) -> Graph:
    idx = np.argsort(y)
    return Graph(adjacency=a[idx][:, idx], features=x[idx], labels=y[idx])


def csbm_graph(
    n: int = CSBMConfig.n,
    avg_within_class_degree: float = CSBMConfig.avg_within_class_degree,
    avg_between_class_degree: float = CSBMConfig.avg_between_class_degree,
    K: float = CSBMConfig.K,
    sigma: float = CSBMConfig.sigma,
    seed: int = 0,
    sort: bool = True,
) -> Graph:
    """Sample a two-class CSBM graph exactly as the official sampler does for ``seed``."""
    if not isinstance(n, (int, np.integer)) or n < 3:
        raise ValueError(f"n must be an integer >= 3, got {n!r}")
    p = avg_within_class_degree * 2 / (n - 1)
    q = avg_between_class_degree * 2 / (n - 1)
    if not (0 <= p <= 1 and 0 <= q <= 1):
        raise ValueError(f"edge probabilities p={p:.3g}, q={q:.3g} must lie in [0, 1]")
    d, mu, cov = _feature_params(n, K, sigma)
    rng = np.random.Generator(np.random.PCG64(seed))
    y = rng.integers(0, 2, size=n)
    n1 = int(y.sum())
    x0 = rng.multivariate_normal(-mu, cov, n - n1).astype(np.float32)
    x1 = rng.multivariate_normal(mu, cov, n1).astype(np.float32)
    x = np.zeros((n, d))
    x[y == 0] = x0
    x[y == 1] = x1
    same = y[:, None] == y[None, :]
    prob = np.triu(np.where(same, p, q), k=1)
    a = rng.binomial(1, prob)
    a += a.T
    return _sort_by_class(x, a, y) if sort else Graph(adjacency=a, features=x, labels=y)


def make_csbm(n: int = CSBMConfig.n, seed: int = 0, **kwargs) -> Graph:
    """Public alias of :func:`csbm_graph`: ``graph.adjacency``, ``graph.features``, ``graph.labels``."""
    return csbm_graph(n=n, seed=seed, **kwargs)


def cba_graph(
    n: int,
    m: int,
    affinity_within: float,
    affinity_between: float,
    K: float = CSBMConfig.K,
    sigma: float = CSBMConfig.sigma,
    seed: int = 0,
    sort: bool = True,
) -> Graph:
    """Contextual Barabasi-Albert graph: node i attaches ``m`` draws to earlier nodes with probability proportional to
    (degree + 1) x affinity (``affinity_within`` for the same class, ``affinity_between`` otherwise)."""
    if n < 3 or m < 1:
        raise ValueError(f"need n >= 3 and m >= 1, got n={n}, m={m}")
    if affinity_within < 0 or affinity_between < 0 or affinity_within + affinity_between == 0:
        raise ValueError("affinities must be non-negative and not both zero")
    d, mu, cov = _feature_params(n, K, sigma)
    rs = np.random.RandomState(seed)
    y = rs.randint(0, 2, size=n)
    n1 = int(y.sum())
    x0 = rs.multivariate_normal(-mu, cov, n - n1).astype(np.float32)
    x1 = rs.multivariate_normal(mu, cov, n1).astype(np.float32)
    x = np.zeros((n, d))
    x[y == 0] = x0
    x[y == 1] = x1
    a = np.zeros((n, n))
    deg = np.ones(n)
    for i in range(1, n):
        aff = np.where(y[:i] == y[i], affinity_within, affinity_between)
        p_draw = deg[:i] * aff
        total = p_draw.sum()
        if total <= 0:
            continue
        draw = rs.multinomial(m, p_draw / total) > 0
        deg[:i] += draw
        deg[i] += draw.sum()
        a[:i, i] = draw
    a += a.T
    x = x.astype(np.float32).astype(np.float64)
    a = a.astype(int)
    return _sort_by_class(x, a, y) if sort else Graph(adjacency=a, features=x, labels=y)
