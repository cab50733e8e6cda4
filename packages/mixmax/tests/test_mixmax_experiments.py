"""The demo's statistics and baselines: seed intervals, the paired bootstrap, JTT weights, the fairlearn arm."""

import numpy as np
import pytest

from iclr25.mixmax.experiments import evaluate, jtt_weights, paired_bootstrap, seed_ci

# Student-t quantile t_{0.975, 4} (tables), an independent constant for the 5-seed interval
T975_4 = 2.7764451051977987


def test_seed_ci_is_the_student_t_interval():
    v = [0.81, 0.84, 0.80, 0.83, 0.85]
    m, lo, hi = seed_ci(v)
    half = T975_4 * np.std(v, ddof=1) / np.sqrt(5)
    assert m == pytest.approx(0.826) and lo == pytest.approx(0.826 - half) and hi == pytest.approx(0.826 + half)
    m1, lo1, hi1 = seed_ci([0.5])
    assert m1 == 0.5 and np.isnan(lo1) and np.isnan(hi1)


def _run(correct_a, correct_b, codes, nll_a=None, nll_b=None):
    nll_a = 1.0 - correct_a if nll_a is None else nll_a
    nll_b = 1.0 - correct_b if nll_b is None else nll_b
    return {
        "codes": codes,
        "arms": {"a": {"_correct": correct_a, "_nll": nll_a}, "b": {"_correct": correct_b, "_nll": nll_b}},
    }


def test_paired_bootstrap_identical_arms_give_exactly_zero():
    """Pairing: both arms are scored on the same resampled rows, so identical arms differ by exactly 0 in every
    replicate (an unpaired bootstrap, resampling each arm's rows independently, gives a nonzero interval)."""
    rng = np.random.default_rng(0)
    runs = []
    for _ in range(4):
        codes = rng.integers(0, 3, 300)
        c = (rng.random(300) < 0.8).astype(float)
        runs.append(_run(c, c.copy(), codes))
    b = paired_bootstrap(runs, "a", "b", n_boot=200)
    assert b["acc"] == (0.0, 0.0, 0.0) and b["logloss"] == (0.0, 0.0, 0.0)


def test_paired_bootstrap_point_estimate_and_sign():
    """Arm a fixes 20 of group 1's 100 errors (the worst group); the worst-group accuracy difference per seed is
    known by hand, and the interval excludes 0."""
    runs = []
    for s in range(5):
        codes = np.repeat([0, 1], [200, 200])
        b_correct = np.ones(400)
        b_correct[200:300] = 0.0  # group 1: accuracy 0.5 for arm b
        a_correct = b_correct.copy()
        a_correct[200 : 220 + s] = 1.0  # arm a: (20 + s) more correct rows in group 1
        runs.append(_run(a_correct, b_correct, codes))
    b = paired_bootstrap(runs, "a", "b", n_boot=300, seed=1)
    expected = np.mean([(20 + s) / 200 for s in range(5)])  # worst group is group 1 for both arms
    assert b["acc"][0] == pytest.approx(expected)
    assert 0 < b["acc"][1] <= b["acc"][0] <= b["acc"][2]
    assert b["logloss"][0] == pytest.approx(-expected) and b["logloss"][2] < 0


def test_evaluate_hard_predictions_override_argmax():
    proba = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.7, 0.3]])
    y = np.array([0, 1, 0, 0])
    g = np.array([0, 0, 1, 1])
    r = evaluate(proba, y, g)
    assert r["group_acc"] == {0: 1.0, 1: 0.5} and r["worst_acc"] == 0.5
    assert r["worst_logloss"] == pytest.approx(max(-np.log([0.9, 0.6]).mean(), -np.log([0.2, 0.7]).mean()))
    r2 = evaluate(proba, y, g, pred=np.array([0, 0, 0, 0]))
    assert r2["group_acc"] == {0: 0.5, 1: 1.0}
    assert r2["worst_logloss"] == r["worst_logloss"]  # the log-loss still comes from proba


def test_jtt_weights_upweight_errors_and_have_mean_one():
    class Fixed:
        def predict(self, X):
            return np.array([0, 1, 1, 0, 0, 0])

    y = np.array([0, 1, 0, 0, 1, 0])  # rows 2 and 4 are wrong
    w = jtt_weights(Fixed(), np.zeros((6, 1)), y, upweight=5.0)
    assert w.mean() == pytest.approx(1.0)
    assert w[2] / w[0] == pytest.approx(5.0) and w[4] == w[2] and len(set(w[[0, 1, 3, 5]])) == 1


def test_fairlearn_arm_gives_soft_probabilities_and_its_own_votes():
    pytest.importorskip("fairlearn")
    from sklearn.linear_model import LogisticRegression

    from iclr25.mixmax.experiments import fit_fairlearn

    rng = np.random.default_rng(0)
    n = 400
    g = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 2)) + g[:, None]
    y = (rng.random(n) < 1 / (1 + np.exp(-(X[:, 0] - X[:, 1] * (2 * g - 1))))).astype(int)
    eg, proba, predict = fit_fairlearn(LogisticRegression(), X, y, g, bound=0.3, max_iter=10)
    p = proba(X)
    assert p.shape == (n, 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    assert 0 < p.min() and p.max() < 1  # soft: the log-loss is not a clip artefact
    # the EG-weighted mixture of the base models' probabilities, computed independently
    w = np.asarray(eg.weights_)
    mix = sum(wt * m.predict_proba(X) for wt, m in zip(w, eg.predictors_))
    np.testing.assert_allclose(p, mix, atol=1e-12)
    # fairlearn's randomized predict draws base model t's label with probability weights_[t]; its per-model labels
    # (what _pmf_predict returns for a loss moment) weighted by weights_ give P(label 1); the arm is its majority
    per_model = np.asarray(eg._pmf_predict(X), dtype=np.float64)
    assert per_model.shape == (n, len(w)) and set(np.unique(per_model)) <= {0.0, 1.0}
    np.testing.assert_array_equal(predict(X), (per_model @ w > 0.5).astype(int))
    assert len(eg.predictors_) > 1  # a real mixture was fitted
