"""The Mallows bandit: population optima equal the closed forms; MallowsPO makes the policy prompt-invariant."""

import numpy as np
import pytest

from iclr25.mallowspo import MallowsBandit, fit_bandit_policy

BETA = 0.5
CENTRAL = np.tile(np.arange(1, 6), (2, 1))


@pytest.fixture(scope="module")
def theta_bandit():
    c = np.array([2.0, 0.3])  # Bradley-Terry scales of the two prompts
    return MallowsBandit(CENTRAL, np.exp(-c / 2), model="theta")


def test_scale_is_the_bradley_terry_scale(theta_bandit):
    assert np.allclose(theta_bandit.scale, [2.0, 0.3])
    pm = theta_bandit.preference_matrix()
    assert pm[0, 0, 1] == pytest.approx(1 / (1 + np.exp(-2.0)))
    assert np.allclose(pm + pm.transpose(0, 2, 1), 1.0)


@pytest.mark.parametrize("method,scale", [("dpo", 1.0), ("mallows_theta", None)])
def test_population_optimum_matches_closed_form(theta_bandit, method, scale):
    fit = fit_bandit_policy(theta_bandit, method, BETA)
    closed = theta_bandit.closed_form_policy(BETA, scale)
    assert np.abs(fit.policy - closed).max() < 1e-6


def test_mallows_is_prompt_invariant_dpo_is_not(theta_bandit):
    dpo = fit_bandit_policy(theta_bandit, "dpo", BETA).policy
    mal = fit_bandit_policy(theta_bandit, "mallows_theta", BETA).policy
    assert np.abs(mal[0] - mal[1]).max() < 1e-6
    assert np.abs(dpo[0] - dpo[1]).max() > 0.4
    # the paper-style numbers of the design note
    assert np.allclose(mal[0], [0.8647, 0.1170, 0.0158, 0.0021, 0.0003], atol=1e-4)
    assert np.allclose(dpo[1], [0.4748, 0.2606, 0.1430, 0.0785, 0.0431], atol=1e-4)
    assert np.allclose(mal, theta_bandit.target_policy(BETA), atol=1e-6)


def test_ipo_two_arm_optimum():
    # per pair, p (cΔ - τ)^2 + (1-p)(-cΔ - τ)^2 is minimised at cΔ = τ (2p - 1), τ = 1/(2β)
    bandit = MallowsBandit(np.array([[1.0, 2.0], [1.0, 3.0]]), np.array([0.3, 0.7]), model="theta")
    pol = fit_bandit_policy(bandit, "mallows_ipo", BETA).policy
    p = bandit.preference_matrix()[:, 0, 1]
    delta = np.log(pol[:, 0]) - np.log(pol[:, 1])  # uniform reference
    assert np.allclose(bandit.scale * delta, (2 * p - 1) / (2 * BETA), atol=1e-6)


def test_phi_model_optimum():
    bandit = MallowsBandit(np.array([[1, 2, 3, 4], [3, 1, 4, 2]]), np.array([0.2, 0.8]), model="phi")
    fit = fit_bandit_policy(bandit, "mallows_phi", BETA)
    assert np.abs(fit.policy - bandit.target_policy(BETA)).max() < 1e-5
    dpo = fit_bandit_policy(bandit, "dpo", BETA)
    assert bandit.kl(bandit.target_policy(BETA), dpo.policy).max() > 0.05


def test_sampled_pairs_follow_the_law():
    bandit = MallowsBandit(np.array([[1, 2, 3]]), np.array([0.4]), model="phi")
    p, c, r = bandit.sample_pairs(20000, rng=0)
    p2, c2, r2 = bandit.sample_pairs(3000, rng=1, from_rankings=True)
    pm = bandit.preference_matrix()[0]
    for _prompts, chosen, rejected, tol in ((p, c, r, 0.02), (p2, c2, r2, 0.05)):
        pair = ((chosen == 0) & (rejected == 2)) | ((chosen == 2) & (rejected == 0))
        freq = np.mean(chosen[pair] == 0)
        assert freq == pytest.approx(pm[0, 2], abs=tol)


def test_sampled_fit_approaches_population(theta_bandit):
    pairs = theta_bandit.sample_pairs(20000, rng=3)
    fit = fit_bandit_policy(theta_bandit, "mallows_theta", BETA, pairs=pairs)
    kl = theta_bandit.kl(theta_bandit.target_policy(BETA), fit.policy)
    assert kl.max() < 0.05


def test_bandit_validation():
    with pytest.raises(ValueError, match="permutation"):
        MallowsBandit(np.array([[1.0, 1.5]]), np.array([0.5]), model="phi")
    with pytest.raises(ValueError, match="dispersion"):
        MallowsBandit(CENTRAL, np.array([0.5, 1.2]))
    with pytest.raises(ValueError, match="method"):
        fit_bandit_policy(MallowsBandit(CENTRAL, np.array([0.5, 0.5])), "kto", BETA)


@pytest.mark.parametrize("method", ["dpo", "mallows_theta", "mallows_ipo", "mallows_phi"])
def test_fit_from_the_reference_has_a_gradient(method):
    # started at π = π_ref (Δ = 0 on every pair, non-uniform reference), every method must have a non-zero gradient
    # there; MallowsPO-ϕ's is the right-limit slope of log g_ϕ at 0 (a tie value 1/2 would give exactly 0)
    ref = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
    bandit = MallowsBandit(np.array([[1, 2, 3, 4], [3, 1, 4, 2]]), np.array([0.2, 0.8]), model="phi", ref_probs=ref)
    fit = fit_bandit_policy(bandit, method, BETA, max_iter=20)
    assert fit.grad_norm_at_start > 1e-3
    assert np.abs(fit.policy - ref).max() > 1e-2  # it left the reference
    assert fit.iterations > 1
    with pytest.raises(ValueError, match="init"):
        fit_bandit_policy(bandit, method, BETA, init="zeros")
