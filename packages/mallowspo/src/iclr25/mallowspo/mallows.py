"""Mallows ranking models: exact pairwise preference laws and samplers.

A Mallows model over rankings of the responses to a prompt has a central ranking ``mu0`` and a dispersion
``phi in (0, 1]`` (equivalently ``theta = -log phi``):

* Mallows-theta (Spearman's rho):  p(mu) ∝ exp(-theta * sum_i (mu(i) - mu0(i))^2)
* Mallows-phi (Kendall's tau):     p(mu) ∝ phi ** inversions(mu, mu0)

Pairwise laws used by MallowsPO (Chen et al., ICLR 2025):

* ``pairwise_prob_theta(d, theta) = sigmoid(2 * theta * d)``: the exact probability that, of two responses whose
  central positions differ by ``d`` (real-valued), the better-placed one is ranked first. For two items the two
  rankings have Spearman distances that differ by ``2 d`` (with real central positions r1, r2 placed in {1, 2}:
  ((2-r1)^2 + (1-r2)^2) - ((1-r1)^2 + (2-r2)^2) = 2 (r2 - r1)), hence the sigmoid; this is the Bradley-Terry law
  with scale ``2 theta``.
* ``pairwise_prob_phi(d, phi) = (d+1)/(1-phi^(d+1)) - d/(1-phi^d)``: the exact marginal probability, under a
  Mallows-phi model over any number of items, that the item ranked ``d >= 1`` places better in ``mu0`` is ranked
  first (Busa-Fekete et al., 2014). It is checked against enumeration of all permutations in the tests.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

__all__ = [
    "enumerate_mallows_phi",
    "enumerate_mallows_theta",
    "g_phi_at_zero",
    "log_g_phi",
    "pairwise_prob_phi",
    "pairwise_prob_theta",
    "sample_mallows_phi",
    "sample_mallows_theta",
]

_PHI_UNIFORM = 1.0 - 1e-9  # phi this close to 1 is the uniform model: g = 1/2 (the closed form is 0/0 at phi = 1)


def _check_phi(phi) -> None:
    arr = np.asarray(phi.detach().cpu() if isinstance(phi, torch.Tensor) else phi, dtype=float)
    if not np.all((arr > 0) & (arr <= 1)):
        raise ValueError(f"phi must lie in (0, 1]; got values in [{arr.min()}, {arr.max()}]")


def pairwise_prob_theta(d, theta):
    """P(better ≻ worse) under Mallows-theta for two responses whose central positions differ by ``d``.

    Equals ``sigmoid(2 * theta * d)``; ``d`` and ``theta`` broadcast (numpy arrays, floats or torch tensors).
    """
    if isinstance(d, torch.Tensor) or isinstance(theta, torch.Tensor):
        d_t = torch.as_tensor(d, dtype=torch.float64)
        return torch.sigmoid(2.0 * torch.as_tensor(theta, dtype=torch.float64) * d_t)
    z = 2.0 * np.asarray(theta, dtype=float) * np.asarray(d, dtype=float)
    out = 0.5 * (1.0 + np.tanh(0.5 * z))  # stable sigmoid
    return float(out) if out.ndim == 0 else out


def g_phi_at_zero(phi) -> tuple[float, float]:
    """(g_phi(0+), g_phi'(0+)): the one-sided limits at 0 of the Mallows-phi link and of its slope.

    Write L = log phi < 0 and f(s) = s / (1 - phi^s), so that g_phi(s) = f(s + 1) - f(s) for s > 0. Expanding
    1 - e^(Ls) = -Ls (1 + Ls/2 + (Ls)^2/6 + ...) gives f(s) = -1/L + s/2 + O(s^2), hence f(0+) = -1/L and
    f'(0+) = 1/2. With f'(s) = (1 - phi^s + s L phi^s) / (1 - phi^s)^2 at s = 1:

        g_phi(0+)  = f(1) - f(0+)   = 1/(1 - phi) + 1/log(phi)                          (> 1/2)
        g_phi'(0+) = f'(1) - f'(0+) = (1 - phi + phi log(phi)) / (1 - phi)^2 - 1/2      (> 0 for phi < 1)

    (0.5573 and 0.1137 at phi = 0.5; as phi -> 1 both tend to the uniform model's 1/2 and 0).
    """
    _check_phi(phi)
    phi = float(phi)
    if phi >= _PHI_UNIFORM:
        return 0.5, 0.0
    log_phi = math.log(phi)
    value = 1.0 / (1.0 - phi) + 1.0 / log_phi
    slope = (1.0 - phi + phi * log_phi) / (1.0 - phi) ** 2 - 0.5
    return value, slope


def log_g_phi(s: torch.Tensor, phi) -> torch.Tensor:
    """log g_phi(s): the log of the Mallows-phi pairwise link extended to real ``s``, computed stably in float64.

    For s > 0, g_phi(s) = (s+1)/(1-phi^(s+1)) - s/(1-phi^s) (the exact law at integer s); for s < 0,
    g_phi(s) = 1 - g_phi(-s). The link jumps at 0: g_phi(0+) = 1/(1-phi) + 1/log(phi) > 1/2 (0.557 at phi = 0.5)
    while g_phi(0-) = 1 - g_phi(0+).

    Convention at s = 0 (where every policy starts, pi = pi_ref): we take the right limit, value g_phi(0+) *and*
    slope g_phi'(0+) > 0 (derived in :func:`g_phi_at_zero`), i.e. g_phi is right-continuous and
    d/ds log g_phi(0) = g_phi'(0+) / g_phi(0+). A symmetric tie value 1/2 would be a constant with zero gradient,
    so MallowsPO-phi could never leave pi = pi_ref; with the right limit, -log g_phi(beta * Delta) decreases as
    the chosen log-prob rises, exactly as just to the right of 0. ``phi >= 1 - 1e-9`` is the uniform model
    (g = 1/2, slope 0: such a prompt carries no preference information).

    The jump remains a jump: a margin that turns slightly negative after a step has loss -log(1 - g_phi(0+)), above
    the loss at 0. Gradient methods (SGD, Adam) are unaffected; a method that compares loss values (a line search)
    must not start at exactly s = 0 (see ``fit_bandit_policy(init="reference")``).

    We use the closed form 1 - g_phi(t) = A (t (1-phi) - phi (1-A)) / ((1 - phi A)(1 - A)), A = phi^t (t > 0),
    which has no cancellation for large t and uses expm1 for small t.
    """
    s = torch.as_tensor(s)
    out_dtype = s.dtype if s.is_floating_point() else torch.float32
    s64 = s.to(torch.float64)
    phi_in = torch.as_tensor(phi, dtype=torch.float64, device=s.device)
    if bool(torch.isnan(phi_in).any()) or bool(((phi_in <= 0) | (phi_in > 1)).any()):
        raise ValueError(f"phi must lie in (0, 1] (no NaN); got {phi_in.flatten()[:8].tolist()}")
    if bool(torch.isnan(s64).any()):
        raise ValueError("log_g_phi got NaN in s (the preference margin beta * Delta)")
    uniform = phi_in >= _PHI_UNIFORM
    phi64 = torch.where(uniform, torch.full_like(phi_in, 0.5), phi_in)
    log_phi = torch.log(phi64)
    t = s64.abs()
    zero = t == 0
    t_safe = torch.where(zero, torch.ones_like(t), t)
    one_minus_a = -torch.expm1(t_safe * log_phi)  # 1 - phi^t
    one_minus_phi_a = -torch.expm1((t_safe + 1.0) * log_phi)  # 1 - phi^(t+1)
    numer = t_safe * (1.0 - phi64) + phi64 * torch.expm1(t_safe * log_phi)  # t(1-phi) - phi(1-A)
    log_tail = t_safe * log_phi + torch.log(numer) - torch.log(one_minus_phi_a) - torch.log(one_minus_a)
    log_g_pos = torch.log1p(-torch.exp(log_tail))  # log g(t), t > 0
    out = torch.where(s64 > 0, log_g_pos, log_tail)
    # s == 0: the right limit, value log g(0+) and slope g'(0+)/g(0+) (see g_phi_at_zero), as a linear term in s
    # so autograd carries the slope; the term is exactly log g(0+) at s = 0.
    g0 = 1.0 / (1.0 - phi64) + 1.0 / log_phi
    dg0 = (1.0 - phi64 + phi64 * log_phi) / (1.0 - phi64) ** 2 - 0.5
    at_zero = torch.log(g0) + (dg0 / g0) * s64
    out = torch.where(zero, at_zero, out)
    out = torch.where(uniform, torch.full_like(out, -math.log(2.0)) + 0.0 * s64, out)
    return out.to(out_dtype)


def pairwise_prob_phi(d, phi):
    """P(item ranked ``d`` places better in the central ranking is ranked first) under Mallows-phi.

    ``d`` must be >= 1 (integers give the exact law; real values use the continuous extension of ``log_g_phi``);
    ``phi`` in (0, 1]. Returns a float/ndarray for numpy input and a float64 tensor for tensor input.
    """
    _check_phi(phi)
    as_tensor = isinstance(d, torch.Tensor) or isinstance(phi, torch.Tensor)
    d_t = torch.as_tensor(d, dtype=torch.float64)
    if torch.any(d_t < 1):
        raise ValueError("pairwise_prob_phi needs rank differences d >= 1 (the better item first)")
    out = torch.exp(log_g_phi(d_t, phi))
    if as_tensor:
        return out
    arr = out.numpy()
    return float(arr) if arr.ndim == 0 else arr


# ----------------------------------------------------------------------------------------------------------------
# exact enumeration (small n; the oracle for the pairwise laws)
# ----------------------------------------------------------------------------------------------------------------


def _inversions(perm) -> int:
    perm = list(perm)
    return sum(1 for i in range(len(perm)) for j in range(i + 1, len(perm)) if perm[i] > perm[j])


def enumerate_mallows_phi(n: int, phi: float) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """All n! rankings (tuples of items 0..n-1, best first; central ranking = identity) and their probabilities."""
    if n < 1 or n > 8:
        raise ValueError(f"enumeration is for 1 <= n <= 8, got n={n}")
    _check_phi(phi)
    perms = list(itertools.permutations(range(n)))
    w = np.array([phi ** _inversions(p) for p in perms], dtype=float)
    return perms, w / w.sum()


def enumerate_mallows_theta(central: np.ndarray, theta: float) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """All rankings of len(central) items with Mallows-theta probabilities.

    ``central[i]`` is item i's (real-valued) central position; a ranking ``perm`` lists items best first, so item
    ``perm[k]`` gets position k + 1. p ∝ exp(-theta * sum_i (pos(i) - central[i])^2).
    """
    central = np.asarray(central, dtype=float)
    n = len(central)
    if n < 1 or n > 8:
        raise ValueError(f"enumeration is for 1 <= n <= 8 items, got {n}")
    perms = list(itertools.permutations(range(n)))
    logw = []
    for p in perms:
        pos = np.empty(n)
        pos[list(p)] = np.arange(1, n + 1)
        logw.append(-theta * np.sum((pos - central) ** 2))
    logw = np.array(logw)
    w = np.exp(logw - logw.max())
    return perms, w / w.sum()


# ----------------------------------------------------------------------------------------------------------------
# samplers
# ----------------------------------------------------------------------------------------------------------------


def sample_mallows_phi(n: int, phi: float, central=None, rng=None, size: int | None = None) -> np.ndarray:
    """Sample Mallows-phi rankings with the repeated-insertion model (Doignon et al., 2004).

    Items of the central ranking are inserted one by one; the i-th item (1-based) goes to position j in 1..i with
    probability ∝ phi^(i - j), i.e. every place it jumps ahead of an earlier (better) item costs one inversion.

    Args:
        n: number of items.
        phi: dispersion in (0, 1]; 1 is uniform, -> 0 concentrates on ``central``.
        central: the central ranking, a permutation of 0..n-1 listed best first (default: identity).
        rng: a ``numpy.random.Generator`` or a seed.
        size: number of rankings; ``None`` returns one ranking of shape [n], else [size, n].

    Returns:
        Rankings as arrays of items, best first.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    _check_phi(phi)
    central = np.arange(n) if central is None else np.asarray(central)
    if sorted(central.tolist()) != list(range(n)):
        raise ValueError(f"central must be a permutation of 0..{n - 1}, got {central.tolist()}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    m = 1 if size is None else int(size)
    out = np.empty((m, n), dtype=np.int64)
    for row in range(m):
        ranking: list[int] = []
        for i in range(1, n + 1):
            w = float(phi) ** np.arange(i - 1, -1, -1)  # position j = 1..i has weight phi^(i-j)
            j = rng.choice(i, p=w / w.sum())
            ranking.insert(j, int(central[i - 1]))
        out[row] = ranking
    return out[0] if size is None else out


def sample_mallows_theta(central, theta: float, rng=None, size: int | None = None) -> np.ndarray:
    """Sample Mallows-theta rankings exactly by enumeration (n <= 8 items); ``central`` as in
    :func:`enumerate_mallows_theta`. Returns items best first, shape [n] or [size, n]."""
    perms, probs = enumerate_mallows_theta(central, theta)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    idx = rng.choice(len(perms), size=1 if size is None else size, p=probs)
    arr = np.array([perms[i] for i in idx], dtype=np.int64)
    return arr[0] if size is None else arr
