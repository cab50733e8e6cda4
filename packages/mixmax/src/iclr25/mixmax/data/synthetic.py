"""Synthetic groups with a known MixMax optimum.

* discrete tables P [G, X, Y] (exact optimum by :func:`iclr25.mixmax.solve_discrete`);
* Gaussian groups: x ~ N(mu_g, sigma_g^2) in 1-D and y|x ~ Bernoulli(sigmoid(a_g x + b_g)); the population optimum
  is computed on a fine grid (:meth:`GaussianGroups.table`);
* the paper's Markov-chain groups (sequence modelling, x empty): the optimum over all S^L sequences by enumeration.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ..config import MarkovConfig
from .tabular import TabularData

__all__ = [
    "example_table",
    "make_discrete_groups",
    "GaussianGroups",
    "make_gaussian_groups",
    "MarkovGroups",
    "make_markov_groups",
]


def example_table() -> np.ndarray:
    """A 3-group table (x in {0,1,2}, y in {0,1}) with a boundary optimum: lambda* = (0.53971, 0.46029, 0),
    L(lambda*) = 0.6858669 nats (CE); the uniform mixture's worst-group risk is 0.72611."""
    return np.array(
        [
            [[0.30, 0.10], [0.20, 0.10], [0.05, 0.25]],
            [[0.05, 0.35], [0.10, 0.10], [0.30, 0.10]],
            [[0.15, 0.15], [0.25, 0.05], [0.10, 0.30]],
        ]
    )


def make_discrete_groups(n_groups: int, n_x: int, n_y: int, concentration: float = 1.0, seed: int = 0) -> np.ndarray:
    """Random joint pmfs P [G, X, Y], each P[g] ~ Dirichlet(concentration * 1) over the X*Y cells."""
    if min(n_groups, n_x, n_y) < 1 or concentration <= 0:
        raise ValueError("n_groups, n_x, n_y must be >= 1 and concentration > 0")
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(n_x * n_y, concentration), size=n_groups).reshape(n_groups, n_x, n_y)


@dataclass
class GaussianGroups:
    """1-D groups: x ~ N(means[g], stds[g]^2), P(y=1|x) = sigmoid(slopes[g] x + intercepts[g])."""

    means: np.ndarray
    stds: np.ndarray
    slopes: np.ndarray
    intercepts: np.ndarray

    @property
    def n_groups(self) -> int:
        return len(self.means)

    def log_px(self, x: np.ndarray) -> np.ndarray:
        """log p_g(x) [n, G]."""
        z = (x[:, None] - self.means[None]) / self.stds[None]
        return -0.5 * z**2 - np.log(self.stds[None]) - 0.5 * np.log(2 * np.pi)

    def p1(self, x: np.ndarray) -> np.ndarray:
        """P_g(y=1|x) [n, G]."""
        return expit(self.slopes[None] * x[:, None] + self.intercepts[None])

    def sample(self, n_per_group: int, seed: int = 0) -> TabularData:
        rng = np.random.default_rng(seed)
        xs, ys, gs = [], [], []
        for g in range(self.n_groups):
            x = rng.normal(self.means[g], self.stds[g], size=n_per_group)
            p = expit(self.slopes[g] * x + self.intercepts[g])
            xs.append(x), ys.append((rng.random(n_per_group) < p).astype(np.int64)), gs.append(np.full(n_per_group, g))
        return TabularData(np.concatenate(xs)[:, None], np.concatenate(ys), np.concatenate(gs), ["x"])

    def table(self, n_grid: int = 2001, width: float = 8.0) -> np.ndarray:
        """The population discretised on a grid: P [G, n_grid, 2] (Riemann sums, renormalised)."""
        lo = float(np.min(self.means - width * self.stds))
        hi = float(np.max(self.means + width * self.stds))
        x = np.linspace(lo, hi, n_grid)
        px = np.exp(self.log_px(x)).T  # [G, n]
        p1 = self.p1(x).T
        P = np.stack([px * (1 - p1), px * p1], axis=2)
        return P / P.sum(axis=(1, 2), keepdims=True)


def make_gaussian_groups() -> GaussianGroups:
    """Three overlapping groups whose label rules disagree; the optimum weights are interior and non-uniform."""
    return GaussianGroups(
        means=np.array([-1.0, 0.5, 1.5]),
        stds=np.array([1.0, 0.8, 1.2]),
        slopes=np.array([2.0, -1.5, 0.5]),
        intercepts=np.array([0.0, 0.5, -0.5]),
    )


@dataclass
class MarkovGroups:
    """Groups that are Markov chains on S states, each started from its stationary distribution."""

    transitions: np.ndarray  # [G, S, S], rows sum to 1
    initial: np.ndarray  # [G, S]

    @property
    def n_groups(self) -> int:
        return self.transitions.shape[0]

    @property
    def n_states(self) -> int:
        return self.transitions.shape[1]

    def log_prob(self, seqs: np.ndarray) -> np.ndarray:
        """log p_g(s) of integer sequences [n, L] under every chain -> [n, G]."""
        seqs = np.asarray(seqs, dtype=np.int64)
        logT = np.log(self.transitions)
        out = np.log(self.initial[:, seqs[:, 0]]).T  # [n, G]
        for t in range(1, seqs.shape[1]):
            out += logT[:, seqs[:, t - 1], seqs[:, t]].T
        return out

    def sample(self, n: int, length: int, group: int, seed: int = 0) -> np.ndarray:
        """n sequences of the given length from one chain -> int [n, length]."""
        rng = np.random.default_rng(seed)
        S = self.n_states
        out = np.empty((n, length), dtype=np.int64)
        out[:, 0] = rng.choice(S, size=n, p=self.initial[group])
        cum = np.cumsum(self.transitions[group], axis=1)
        for t in range(1, length):
            u = rng.random(n)
            out[:, t] = np.minimum((u[:, None] > cum[out[:, t - 1]]).sum(axis=1), S - 1)
        return out

    def table(self, length: int) -> np.ndarray:
        """All S^length sequences: P [G, 1, S^length] (x is empty; y is the sequence)."""
        seqs = np.array(list(itertools.product(range(self.n_states), repeat=length)), dtype=np.int64)
        return np.exp(self.log_prob(seqs)).T[:, None, :]


def _stationary(T: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eig(T.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1.0))])
    return pi / pi.sum()


def make_markov_groups(
    n_groups: int = MarkovConfig.n_groups,
    n_states: int = MarkovConfig.n_states,
    concentration: float = MarkovConfig.concentration,
    seed: int = 0,
) -> MarkovGroups:
    """The paper's setup: transition rows ~ Dirichlet(concentration * 1), start from the stationary distribution."""
    rng = np.random.default_rng(seed)
    T = rng.dirichlet(np.full(n_states, concentration), size=(n_groups, n_states))
    return MarkovGroups(T, np.stack([_stationary(T[g]) for g in range(n_groups)]))
