"""MixMax end to end against population oracles; weights really reach the final model; caching is exact."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

from iclr25.mixmax import (
    ClassifierDensityRatio,
    MixMax,
    balanced_sample_weight,
    group_sample_weight,
    solve_discrete,
)
from iclr25.mixmax.data import make_gaussian_groups
from iclr25.mixmax.official import recompute_solve


@pytest.fixture(scope="module")
def gauss():
    gg = make_gaussian_groups()
    return gg, gg.sample(1500, seed=1), solve_discrete(gg.table(801))


@pytest.mark.parametrize("density", ["kde", "classifier"])
def test_mixmax_recovers_population_optimum(gauss, density):
    gg, d, pop = gauss
    # the groups' x-variances differ, so log P(g|x) is quadratic in x: give the ratio classifier x^2
    ratio_clf = make_pipeline(PolynomialFeatures(2), LogisticRegression())
    mm = MixMax(
        LogisticRegression(),
        density=density,
        density_estimator=ratio_clf,
        tol=1e-6,
        max_steps=5000,
        cross_fit=2,
        entropy=0.0,  # the paper's objective
    )
    mm.fit(d.X, d.y, d.groups)
    assert mm.converged_ and mm.gap_ <= 1e-6
    np.testing.assert_allclose(mm.weights_, pop.weights, atol=0.06)
    assert mm.value_ == pytest.approx(pop.value, abs=0.01)
    assert mm.weights_.sum() == pytest.approx(1.0) and np.all(mm.weights_ >= 0)


def test_mixmax_with_true_models_is_exact(gauss):
    """With the true densities and conditionals, the sample risks converge to the population optimum."""
    gg, _, pop = gauss
    d = gg.sample(5000, seed=3)
    x, g = d.X[:, 0], d.groups
    p1 = gg.p1(x)
    log_py = np.log(np.where(d.y[:, None] == 1, p1, 1 - p1))
    from iclr25.mixmax import RiskCache, mirror_ascent

    cache = RiskCache(g, gg.log_px(x), log_py, 3, "ce")
    res = mirror_ascent(cache.risks, 3, step_size=3.0, tol=1e-6, max_steps=3000)
    assert res.converged
    np.testing.assert_allclose(res.weights, pop.weights, atol=0.03)
    assert res.value == pytest.approx(pop.value, abs=0.01)


def test_classifier_density_ratio_matches_true_log_ratio():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, 4000), rng.normal(1, 1, 2000)])[:, None]
    g = np.repeat([0, 1], [4000, 2000])
    r = ClassifierDensityRatio(LogisticRegression()).fit(X, g, 2).log_density_matrix(np.array([[-1.0], [0.5], [2.0]]))
    # log p_1(x) - log p_0(x) = x - 1/2
    np.testing.assert_allclose(r[:, 1] - r[:, 0], [-1.5, 0.0, 1.5], atol=0.1)


def test_cached_solve_equals_per_step_recompute(gauss):
    _, d, _ = gauss
    sub = np.r_[0:200, 1500:1700, 3000:3200]
    mm = MixMax(LogisticRegression(), density="kde", step_size=0.5, max_steps=6, tol=None, cross_fit=2, entropy=0.1)
    mm.fit_weights(d.X[sub], d.y[sub], d.groups[sub])
    X, y, _, codes, _, _ = mm._prepare(d.X[sub], d.y[sub], d.groups[sub], reset=False)
    lam = recompute_solve(mm, mm.fold_models_, X, y, codes)
    np.testing.assert_allclose(lam, mm.weights_, rtol=1e-12)


def test_official_preset_settings(gauss):
    _, d, _ = gauss
    mm = MixMax.official(LogisticRegression()).fit_weights(d.X, d.y, d.groups)
    assert mm.cross_fit is None and mm.n_steps_ == 20 and not mm.converged_
    assert np.abs(np.log(mm.weights_ * 3)).max() < 0.5  # 20 steps of 0.1 barely move lambda


def _replicate_check(weights_fn):
    from xgboost import XGBClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=120) > 0).astype(int)
    k = rng.integers(1, 4, size=120)
    kw = dict(n_estimators=20, max_depth=3, tree_method="exact", random_state=0, n_jobs=1)
    a = XGBClassifier(**kw).fit(X, y, sample_weight=weights_fn(k)).predict_proba(X)
    b = XGBClassifier(**kw).fit(np.repeat(X, k, 0), np.repeat(y, k)).predict_proba(X)
    return a, b


def test_xgboost_integer_weights_equal_row_replication():
    a, b = _replicate_check(lambda k: k.astype(float))
    np.testing.assert_allclose(a, b, atol=1e-6)
    a, b = _replicate_check(lambda k: np.ones(len(k)))
    assert np.abs(a - b).max() > 1e-3  # ignoring the weights is detected


def test_final_model_receives_mixmax_weights():
    """MixMax.fit passes its sample weights to the final estimator: equal to fitting it by hand with them."""
    from xgboost import XGBClassifier

    gg = make_gaussian_groups()
    d = gg.sample(300, seed=4)
    est = XGBClassifier(n_estimators=15, max_depth=3, tree_method="exact", random_state=0, n_jobs=1)
    mm = MixMax(est, density="kde", max_steps=50).fit(d.X, d.y, d.groups)
    w = mm.sample_weight(d.groups)
    by_hand = XGBClassifier(n_estimators=15, max_depth=3, tree_method="exact", random_state=0, n_jobs=1)
    by_hand.fit(d.X, d.y, sample_weight=w)
    np.testing.assert_allclose(mm.predict_proba(d.X), by_hand.predict_proba(d.X), atol=1e-7)
    assert set(np.unique(mm.predict(d.X))) <= {0, 1}


def test_sample_weight_totals_follow_lambda():
    groups = np.array(["a"] * 10 + ["b"] * 30 + ["c"] * 60)
    lam = np.array([0.5, 0.3, 0.2])
    w = group_sample_weight(groups, lam)
    totals = np.array([w[groups == g].sum() for g in "abc"])
    np.testing.assert_allclose(totals / totals.sum(), lam)
    assert w.mean() == pytest.approx(1.0)
    bw = balanced_sample_weight(groups)  # one normalisation for every arm: equal group totals, mean weight 1
    np.testing.assert_allclose([bw[groups == g].sum() for g in "abc"], 100 / 3)
    assert bw.mean() == pytest.approx(1.0)
    # the official normalisation: (lambda_g / max lambda) * (n_max / n_g), by hand
    wo = group_sample_weight(groups, lam, normalization="official")
    np.testing.assert_allclose(wo[[0, 10, 40]], [1.0 * 60 / 10, 0.6 * 60 / 30, 0.4 * 60 / 60])
    np.testing.assert_allclose(balanced_sample_weight(groups, "official")[[0, 10, 40]], [6.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="unknown group"):
        group_sample_weight(np.array(["a", "z"]), lam, np.array(["a", "b", "c"]))


def test_string_labels_and_groups():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.where(X[:, 0] > 0, "yes", "no")
    g = np.where(X[:, 1] > 0.3, "left", "right")
    mm = MixMax(LogisticRegression(), max_steps=30).fit(X, y, g)
    assert mm.groups_.tolist() == ["left", "right"]
    assert set(mm.predict(X)) <= {"no", "yes"}
    assert mm.predict_proba(X).shape == (300, 2)
    with pytest.raises(ValueError, match="outside the estimator's classes"):
        mm.encode_labels(["maybe"])


def test_single_group_gets_weight_one_and_group_without_class():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 1))
    y = (X[:, 0] > 0).astype(int)
    mm = MixMax(LogisticRegression(), max_steps=10).fit_weights(X, y, np.zeros(100))
    assert mm.weights_.tolist() == [1.0]
    # a group that only ever has label 1: its conditional is a constant predictor, risks stay finite
    g = np.where(X[:, 0] > 1.0, 1, 0)
    mm = MixMax(LogisticRegression(), max_steps=10).fit_weights(X, y, g)
    assert np.all(np.isfinite(mm.group_risks_))


def test_mse_regression():
    rng = np.random.default_rng(0)
    n = 600
    g = np.repeat([0, 1], n)
    x = np.concatenate([rng.normal(-1, 1, n), rng.normal(1, 1, n)])
    y = np.where(g == 0, 2 * x, -x) + rng.normal(0, np.where(g == 0, 0.3, 1.0))
    mm = MixMax(LinearRegression(), loss="mse", tol=1e-6, max_steps=3000, entropy=0.0).fit(x[:, None], y, g)
    assert mm.converged_
    # the noisier group (irreducible MSE 1.0 vs 0.09) dominates the worst case
    assert mm.weights_[1] > mm.weights_[0]
    assert mm.group_risks_.max() == pytest.approx(mm.value_, abs=1e-6)
    assert mm.predict(x[:5, None]).shape == (5,)


def test_input_errors():
    X = np.zeros((10, 2))
    y = np.array([0, 1] * 5)
    g = np.array([0] * 9 + [1])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        MixMax().fit(X, y[:9], g)
    with pytest.raises(ValueError, match="fewer than cross_fit"):
        MixMax(LogisticRegression(), cross_fit=2).fit_weights(X, y, g)
    with pytest.raises(ValueError, match="1 class"):
        MixMax(LogisticRegression()).fit_weights(X, np.zeros(10), np.zeros(10))
    with pytest.raises(ValueError, match="Expected 2D array"):
        MixMax().fit(np.zeros(10), y, g)
    with pytest.raises(ValueError, match="cross_fit"):
        MixMax(cross_fit=1).fit(X, y, g)
    with pytest.raises(ValueError, match="density"):
        MixMax(density="histogram").fit(X, y, g)
    with pytest.raises(ValueError, match="not fitted"):
        MixMax().predict(X)
    with pytest.raises(ValueError, match="loss"):
        MixMax(loss="hinge").fit(X, y, g)
