"""The paper's Markov-chain groups: exact optimum by enumerating all sequences; the sample-based E-MixMax (true
chain probabilities, empirical risks) approaches it as the sample count grows."""

import numpy as np
import pytest

from iclr25.mixmax import RiskCache, mirror_ascent, solve_discrete
from iclr25.mixmax.data import make_markov_groups

LENGTH = 4


@pytest.fixture(scope="module")
def chains():
    return make_markov_groups(n_groups=3, n_states=4, concentration=1.0, seed=2)


@pytest.fixture(scope="module")
def exact(chains):
    return solve_discrete(chains.table(LENGTH), loss="ce")


def test_chain_tables_are_pmfs(chains):
    P = chains.table(LENGTH)
    assert P.shape == (3, 1, 4**LENGTH)
    np.testing.assert_allclose(P.sum(axis=(1, 2)), 1.0, atol=1e-12)
    # stationary start: the marginal of the second state equals the first
    for g in range(3):
        np.testing.assert_allclose(chains.initial[g] @ chains.transitions[g], chains.initial[g], atol=1e-12)


def test_exact_optimum_maximises_mixture_entropy(chains, exact):
    import cvxpy as cp

    P = chains.table(LENGTH)[:, 0, :]  # [G, S^L]
    lam = cp.Variable(3, nonneg=True)
    prob = cp.Problem(cp.Maximize(cp.sum(cp.entr(P.T @ lam))), [cp.sum(lam) == 1])
    prob.solve()
    assert exact.value == pytest.approx(prob.value, abs=1e-6)
    np.testing.assert_allclose(exact.weights, lam.value, atol=1e-3)
    assert np.abs(exact.weights - 1 / 3).max() > 0.02  # the optimum is not uniform


def _empirical(chains, n, seed):
    seqs = [chains.sample(n, LENGTH, g, seed=seed + g) for g in range(3)]
    log_p = chains.log_prob(np.concatenate(seqs))  # log p_h(s) for every chain h
    groups = np.repeat(np.arange(3), n)
    # x is empty: log p_h(x) = 0 and the "label" is the whole sequence
    cache = RiskCache(groups, np.zeros_like(log_p), log_p, 3, "ce", eps=1e-300)
    return mirror_ascent(cache.risks, 3, step_size=2.0, max_steps=5000, tol=1e-9)


def test_sampled_emixmax_approaches_exact(chains, exact):
    errs = [np.abs(_empirical(chains, n, seed=10).weights - exact.weights).max() for n in (200, 20000)]
    assert errs[1] < 0.03
    assert errs[1] < errs[0]


def test_sampling_matches_chain(chains):
    s = chains.sample(20000, 2, 1, seed=0)
    emp = np.bincount(s[:, 0] * 4 + s[:, 1], minlength=16) / len(s)
    np.testing.assert_allclose(emp, chains.table(2)[1, 0], atol=0.015)
