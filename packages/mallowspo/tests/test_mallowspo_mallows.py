"""Mallows pairwise laws against brute-force enumeration; samplers against exact probabilities (χ² tests)."""

import math

import numpy as np
import pytest
import torch

from iclr25.mallowspo import pairwise_prob_phi, pairwise_prob_theta, sample_mallows_phi, sample_mallows_theta
from iclr25.mallowspo.mallows import enumerate_mallows_phi, enumerate_mallows_theta, log_g_phi

stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("phi", [0.1, 0.5, 0.9, 0.999])
def test_pairwise_phi_equals_enumeration(n, phi):
    perms, probs = enumerate_mallows_phi(n, phi)
    for i in range(n):
        for j in range(i + 1, n):
            p_enum = sum(p for perm, p in zip(perms, probs) if perm.index(i) < perm.index(j))
            assert abs(p_enum - pairwise_prob_phi(j - i, phi)) < 1e-12, (n, phi, i, j)


def test_pairwise_phi_known_values_and_limits():
    for phi in (0.2, 0.5, 0.8):
        assert pairwise_prob_phi(1, phi) == pytest.approx(1 / (1 + phi), abs=1e-14)
        g0 = torch.exp(log_g_phi(torch.tensor([1e-12, -1e-12, 0.0], dtype=torch.float64), phi))
        jump = 1 / (1 - phi) + 1 / math.log(phi)
        assert g0[0].item() == pytest.approx(jump, abs=1e-9)  # g(0+) > 1/2: the link jumps at 0
        assert g0[1].item() == pytest.approx(1 - jump, abs=1e-9)
        assert g0[2].item() == pytest.approx(jump, abs=1e-15)  # our convention at a tie: the right limit
    assert pairwise_prob_phi(1, 1.0) == pytest.approx(0.5, abs=1e-9)
    assert pairwise_prob_phi(200, 0.5) == pytest.approx(1.0, abs=1e-15)
    s = torch.linspace(0.01, 30, 500, dtype=torch.float64)
    g = torch.exp(log_g_phi(s, 0.6))
    assert torch.all(g[1:] > g[:-1])  # increasing on s > 0
    assert torch.allclose(torch.exp(log_g_phi(-s, 0.6)), 1 - g, atol=1e-14)


def test_pairwise_phi_is_not_a_rescaled_sigmoid():
    # a rescaled sigmoid σ(a d) has log-odds proportional to d (zero intercept); Mallows-phi's have an offset
    p = pairwise_prob_phi(np.array([1, 2]), 0.5)
    logodds = np.log(p / (1 - p))
    assert logodds[0] == pytest.approx(math.log(2))
    assert abs(logodds[1] - 2 * logodds[0]) > 0.2


def test_pairwise_theta_two_items_equals_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(10):
        central = rng.uniform(-2, 3, size=2)
        theta = rng.uniform(0.05, 2)
        perms, probs = enumerate_mallows_theta(central, theta)
        p_enum = probs[perms.index((0, 1))]
        assert p_enum == pytest.approx(pairwise_prob_theta(central[1] - central[0], theta), abs=1e-12)


def test_pairwise_theta_n4_marginal_is_not_sigmoid():
    perms, probs = enumerate_mallows_theta(np.arange(1, 5), 0.4)
    p01 = sum(p for perm, p in zip(perms, probs) if perm.index(0) < perm.index(1))
    assert p01 == pytest.approx(0.7319, abs=1e-4)
    assert pairwise_prob_theta(1, 0.4) == pytest.approx(0.6900, abs=1e-4)


def test_sampler_full_distribution_chi2():
    n, phi, m = 4, 0.6, 6000
    perms, probs = enumerate_mallows_phi(n, phi)
    central = np.array([2, 0, 3, 1])
    draws = sample_mallows_phi(n, phi, central=central, rng=1, size=m)
    # relabel: item central[k] plays the role of k in the identity-centred enumeration
    inv = np.empty(n, dtype=int)
    inv[central] = np.arange(n)
    counts = np.zeros(len(perms))
    index = {p: i for i, p in enumerate(perms)}
    for row in draws:
        counts[index[tuple(inv[row])]] += 1
    pval = stats.chisquare(counts, probs * m).pvalue
    assert pval > 1e-3


def test_sampler_pairwise_frequencies_chi2():
    n, phi, m = 6, 0.4, 4000
    draws = sample_mallows_phi(n, phi, rng=2, size=m)
    pos = np.argsort(draws, axis=1)
    chi2 = 0.0
    dof = 0
    for i in range(n):
        for j in range(i + 1, n):
            k = np.sum(pos[:, i] < pos[:, j])
            p = pairwise_prob_phi(j - i, phi)
            chi2 += (k - m * p) ** 2 / (m * p * (1 - p))
            dof += 1
    # the 15 pair indicators are dependent, so this is a loose sanity bound, not an exact χ² test
    assert chi2 < stats.chi2.ppf(0.999, dof) * 3


def test_sample_theta_matches_enumeration():
    central = np.array([1.0, 2.5, 2.0])
    draws = sample_mallows_theta(central, 0.7, rng=3, size=3000)
    perms, probs = enumerate_mallows_theta(central, 0.7)
    counts = np.zeros(len(perms))
    for row in draws:
        counts[perms.index(tuple(row))] += 1
    assert stats.chisquare(counts, probs * 3000).pvalue > 1e-3


def test_bad_inputs():
    with pytest.raises(ValueError, match="phi"):
        pairwise_prob_phi(1, 1.5)
    with pytest.raises(ValueError, match="d >= 1"):
        pairwise_prob_phi(0, 0.5)
    with pytest.raises(ValueError, match="permutation"):
        sample_mallows_phi(3, 0.5, central=[0, 0, 1])
    with pytest.raises(ValueError, match="positive integer"):
        sample_mallows_phi(0, 0.5)
