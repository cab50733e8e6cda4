"""Exact discrete oracles: cvxpy, mirror ascent and the direct function-space group-DRO solve must agree."""

import numpy as np
import pytest

from iclr25.mixmax import group_dro_discrete, mirror_ascent, solve_discrete
from iclr25.mixmax.data import example_table, make_discrete_groups
from iclr25.mixmax.objective import discrete_group_risks, discrete_objective, discrete_predictor

Y01 = np.array([0.0, 1.0])


def test_example_table_ce_known_optimum():
    P = example_table()
    sol = solve_discrete(P, loss="ce")
    np.testing.assert_allclose(sol.weights, [0.539713, 0.460287, 0.0], atol=2e-6)
    assert sol.value == pytest.approx(0.6858669, abs=1e-7)
    # complementary slackness: active groups' risks equal the value, the inactive group is strictly below
    np.testing.assert_allclose(sol.group_risks[:2], sol.value, atol=1e-7)
    assert sol.group_risks[2] < sol.value - 0.03
    assert sol.weights[2] < 1e-8
    # the uniform mixture is worse in the worst group (0.72611)
    f_unif = discrete_predictor(np.full(3, 1 / 3), P)
    assert discrete_group_risks(f_unif, P).max() == pytest.approx(0.72611, abs=1e-5)


def test_example_table_three_solvers_agree_ce():
    P = example_table()
    a = solve_discrete(P, loss="ce")
    b = solve_discrete(P, loss="ce", method="mirror", tol=1e-10)
    value, q = group_dro_discrete(P, loss="ce")
    assert b.gap <= 1e-10
    np.testing.assert_allclose(a.weights, b.weights, atol=1e-6)
    assert a.value == pytest.approx(value, abs=1e-7)
    assert b.value == pytest.approx(value, abs=1e-7)
    # the direct minimax predictor equals the Bayes predictor of the optimal mixture (on x with mass)
    np.testing.assert_allclose(q, a.predictor, atol=1e-4)


def test_example_table_mse():
    P = example_table()
    a = solve_discrete(P, loss="mse", y_values=Y01)
    b = solve_discrete(P, loss="mse", y_values=Y01, method="mirror", tol=1e-10)
    value, q = group_dro_discrete(P, loss="mse", y_values=Y01)
    assert a.value == pytest.approx(0.2463825, abs=1e-6)
    assert b.value == pytest.approx(value, abs=1e-7)
    np.testing.assert_allclose(a.weights, [0.5399, 0.4601, 0.0], atol=2e-4)
    np.testing.assert_allclose(b.weights, a.weights, atol=2e-4)
    np.testing.assert_allclose(q, b.predictor, atol=1e-3)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_random_tables_minimax_equality(seed, loss):
    G, X, Y = [(3, 4, 2), (4, 3, 3), (2, 5, 2), (5, 2, 3), (3, 6, 4), (4, 4, 2)][seed]
    P = make_discrete_groups(G, X, Y, concentration=0.7, seed=seed)
    v = np.linspace(-1.0, 2.0, Y) if loss == "mse" else None
    a = solve_discrete(P, loss=loss, y_values=v)
    b = solve_discrete(P, loss=loss, y_values=v, method="mirror", tol=1e-10)
    direct, _ = group_dro_discrete(P, loss=loss, y_values=v)
    # max_lambda L(lambda) = min_f max_g R_g(f) (the paper's minimax theorem), to solver precision
    assert a.value == pytest.approx(direct, abs=1e-5)
    assert b.value == pytest.approx(direct, abs=1e-6)
    # the optimal mixture predictor's worst-group risk equals L(lambda*)
    assert b.group_risks.max() == pytest.approx(b.value, abs=1e-8)
    # active groups are equalised, inactive groups have weight ~0 and risk <= value
    active = b.weights > 1e-3
    np.testing.assert_allclose(b.group_risks[active], b.value, atol=1e-6)
    assert np.all(b.group_risks <= b.value + 1e-8)
    for s in (a, b):
        assert np.all(s.weights >= 0) and s.weights.sum() == pytest.approx(1.0)


def test_ce_objective_is_conditional_entropy():
    P = make_discrete_groups(3, 4, 3, seed=3)
    lam = np.array([0.2, 0.5, 0.3])
    pxy = np.einsum("g,gxy->xy", lam, P)
    h = -np.sum(pxy * np.log(pxy / pxy.sum(axis=1, keepdims=True)))
    assert discrete_objective(lam, P) == pytest.approx(h, rel=1e-12)


def test_gradient_is_group_risks_danskin():
    P = make_discrete_groups(3, 4, 2, seed=5)
    lam = np.array([0.3, 0.3, 0.4])
    risks = discrete_group_risks(discrete_predictor(lam, P), P)
    # directional derivative along e_g - lam equals R_g - <lam, R> (the simplex-tangent gradient)
    for g in range(3):
        d = np.eye(3)[g] - lam
        h = 1e-6
        num = (discrete_objective(lam + h * d, P) - discrete_objective(lam - h * d, P)) / (2 * h)
        assert num == pytest.approx(risks[g] - lam @ risks, abs=1e-6)


def test_objective_monotone_for_small_steps():
    P = make_discrete_groups(4, 3, 2, seed=7)
    res = mirror_ascent(
        lambda lam: discrete_group_risks(discrete_predictor(lam, P), P, "ce"),
        4,
        step_size=0.05,
        max_steps=200,
        tol=None,
    )
    v = np.array(res.history["value"])
    assert np.all(np.diff(v) >= -1e-12)
    assert np.all(np.array(res.history["gap"]) >= -1e-12)


def test_official_preset_barely_moves():
    P = make_discrete_groups(3, 3, 2, seed=1)
    risks = lambda lam: discrete_group_risks(discrete_predictor(lam, P), P)  # noqa: E731
    res = mirror_ascent(risks, 3, step_size=0.1, max_steps=20, tol=None)
    assert res.n_steps == 20 and not res.converged
    assert np.abs(np.log(res.weights * 3)).max() < 0.5


def test_single_group_and_identical_groups():
    P = make_discrete_groups(1, 3, 2, seed=0)
    s = solve_discrete(P, method="mirror")
    assert s.weights.tolist() == [1.0]
    np.testing.assert_allclose(s.predictor, P[0] / P[0].sum(axis=1, keepdims=True))
    # identical groups: any lambda is optimal; mirror ascent from uniform never moves (all risks equal)
    P3 = np.repeat(P, 3, axis=0)
    s3 = solve_discrete(P3, method="mirror", tol=1e-12)
    np.testing.assert_allclose(s3.weights, np.full(3, 1 / 3), atol=1e-15)
    assert s3.n_steps == 0


def test_mirror_ascent_stops_on_gap():
    P = example_table()
    risks = lambda lam: discrete_group_risks(discrete_predictor(lam, P), P)  # noqa: E731
    res = mirror_ascent(risks, 3, step_size=1.0, max_steps=100000, tol=1e-6)
    assert res.converged and res.gap <= 1e-6 and res.n_steps < 5000
    seen = []
    mirror_ascent(risks, 3, max_steps=3, tol=None, callback=lambda t, lam, r: seen.append(t))
    assert seen == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "P, match",
    [
        (np.ones((2, 2)), "G, X, Y"),
        (-example_table(), "nonnegative"),
        (example_table() * 2, "sum to 1"),
        (np.full((2, 2, 2), np.nan), "finite"),
    ],
)
def test_bad_pmf_rejected(P, match):
    with pytest.raises(ValueError, match=match):
        solve_discrete(P)


def test_bad_arguments_rejected():
    P = example_table()
    with pytest.raises(ValueError, match="y_values"):
        solve_discrete(P, loss="mse")
    with pytest.raises(ValueError, match="y_values"):
        solve_discrete(P, loss="mse", y_values=[0, 1, 2])
    with pytest.raises(ValueError, match="loss"):
        solve_discrete(P, loss="hinge")
    with pytest.raises(ValueError, match="method"):
        solve_discrete(P, method="newton")
    with pytest.raises(ValueError, match="step_size"):
        mirror_ascent(lambda lam: lam, 2, step_size=-1)
    with pytest.raises(ValueError, match="finite"):
        mirror_ascent(lambda lam: np.array([np.nan, 1.0]), 2)


def test_mirror_ascent_resumes_from_init():
    P = make_discrete_groups(3, 3, 2, seed=4)
    risks = lambda lam: discrete_group_risks(discrete_predictor(lam, P), P)  # noqa: E731
    full = mirror_ascent(risks, 3, step_size=0.7, max_steps=20, tol=None)
    half = mirror_ascent(risks, 3, step_size=0.7, max_steps=10, tol=None)
    rest = mirror_ascent(risks, 3, step_size=0.7, max_steps=10, tol=None, init=half.weights)
    np.testing.assert_allclose(rest.weights, full.weights, rtol=1e-12)
    with pytest.raises(ValueError, match="simplex"):
        mirror_ascent(risks, 3, init=np.array([0.5, 0.5, 0.5]))
