"""MixMax as a scikit-learn estimator: estimator checks, clone/params, Pipeline, cross_val_score, GridSearchCV,
up-front validation, sample weights (oracle: row replication) and bad inputs."""

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from iclr25.mixmax import MixMax, SeparableGroupsWarning, group_sample_weight


def _data(n=240, seed=0, shift=1.0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 2)) + shift * g[:, None] * np.array([1.0, -0.5])
    logits = np.array([2.0, -1.5, 0.5])[g] * X[:, 0] + np.array([0.0, 0.5, -0.5])[g]
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(int)
    return X, y, g


def _failed(est):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = check_estimator(est, on_fail=None)
    return [(r["check_name"], repr(r["exception"])[:200]) for r in res if r["status"] == "failed"]


def test_sklearn_estimator_checks_classifier():
    """Every applicable check passes. The generic checks pass no groups, so they exercise the one-group path
    (lambda = [1]); multi-group behaviour is tested below."""
    est = MixMax(LogisticRegression(), max_steps=50)
    assert is_classifier(est)
    assert _failed(est) == []


def test_sklearn_estimator_checks_regressor():
    est = MixMax(LinearRegression(), loss="mse", max_steps=50)
    assert is_regressor(est) and not hasattr(est, "predict_proba")
    assert _failed(est) == []


def test_clone_get_set_params():
    mm = MixMax(LogisticRegression(C=0.5), entropy=0.05, cross_fit=3)
    p = mm.get_params()
    assert p["entropy"] == 0.05 and p["cross_fit"] == 3 and p["estimator__C"] == 0.5
    c = clone(mm).set_params(entropy=0.2, estimator__C=2.0)
    assert c.entropy == 0.2 and c.estimator.C == 2.0 and mm.entropy == 0.05 and mm.estimator.C == 0.5


def test_pipeline_routes_groups_and_sample_weight():
    X, y, g = _data()
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    mm = MixMax(LogisticRegression(), max_steps=100)
    pipe = Pipeline([("scale", StandardScaler()), ("mixmax", mm)])
    pipe.fit(X, y, mixmax__groups=g, mixmax__sample_weight=w)
    by_hand = clone(mm).fit(StandardScaler().fit_transform(X), y, g, sample_weight=w)
    np.testing.assert_allclose(pipe[-1].weights_, by_hand.weights_, atol=1e-12)
    np.testing.assert_allclose(pipe.predict_proba(X), by_hand.predict_proba(StandardScaler().fit(X).transform(X)))


def test_cross_val_score_slices_groups():
    X, y, g = _data()
    mm = MixMax(LogisticRegression(), max_steps=50)
    scores = cross_val_score(mm, X, y, cv=KFold(3), params={"groups": g})
    by_hand = [
        clone(mm).fit(X[tr], y[tr], g[tr]).score(X[te], y[te]) for tr, te in KFold(3).split(X)
    ]  # each fold's model must see the groups of its own training rows
    np.testing.assert_allclose(scores, by_hand)


def test_grid_search_with_group_column():
    X, y, g = _data()
    Xg = np.column_stack([X, g])  # the group label travels as a column of X (kept as a feature)
    gs = GridSearchCV(MixMax(LogisticRegression(), group_column=2, max_steps=50), {"entropy": [0.0, 0.3]}, cv=3)
    gs.fit(Xg, y)
    assert gs.best_estimator_.groups_.tolist() == [0, 1, 2]
    assert len(gs.cv_results_["mean_test_score"]) == 2


def test_grid_search_with_metadata_routing():
    X, y, g = _data()
    with sklearn.config_context(enable_metadata_routing=True):
        mm = MixMax(LogisticRegression(), max_steps=50).set_fit_request(groups=True, sample_weight=False)
        gs = GridSearchCV(mm, {"entropy": [0.0, 0.3]}, cv=KFold(3)).fit(X, y, groups=g)
    assert gs.best_estimator_.n_groups_ == 3


class _Counting(LogisticRegression):
    fits = 0

    def fit(self, X, y, sample_weight=None):
        type(self).fits += 1
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"step_size": -1.0}, "step_size"),
        ({"step_size": float("nan")}, "step_size"),
        ({"max_steps": 2.5}, "max_steps"),
        ({"tol": -1.0}, "tol"),
        ({"entropy": -0.1}, "entropy"),
        ({"entropy": 0.5, "step_size": 3.0}, "entropy \\* step_size"),
        ({"weight_normalization": "max"}, "weight_normalization"),
        ({"bandwidth": "wide"}, "bandwidth"),
        ({"eps": 1.5}, "eps"),
        ({"kde_backend": "cuda"}, "kde_backend"),
        ({"max_samples": 0}, "max_samples"),
    ],
)
def test_bad_parameters_raise_before_any_fit(params, match):
    X, y, g = _data(60)
    _Counting.fits = 0
    with pytest.raises(ValueError, match=match):
        MixMax(_Counting(), **params).fit(X, y, g)
    assert _Counting.fits == 0


def test_estimator_without_sample_weight_rejected_up_front():
    from sklearn.neighbors import KNeighborsClassifier

    X, y, g = _data(60)
    with pytest.raises(ValueError, match="does not accept sample_weight"):
        MixMax(KNeighborsClassifier()).fit(X, y, g)
    # a Pipeline is accepted when its last step takes sample_weight (weights are routed to it)
    mm = MixMax(Pipeline([("s", StandardScaler()), ("lr", LogisticRegression())]), max_steps=20).fit(X, y, g)
    assert mm.weights_.shape == (3,)


def test_integer_sample_weights_equal_row_replication():
    """Oracle: fitting with integer weights k_i equals fitting on the data with row i repeated k_i times (in-sample
    risks, a fixed bandwidth: the rule-of-thumb bandwidth would see the repeated row count)."""
    X, y, g = _data(150, seed=2)
    k = np.random.default_rng(3).integers(1, 4, len(y))
    kw = dict(cross_fit=None, bandwidth=0.5, tol=1e-10, max_steps=5000, entropy=0.0)
    lr = LogisticRegression(tol=1e-10, max_iter=1000)
    a = MixMax(lr, **kw).fit(X, y, g, sample_weight=k)
    b = MixMax(lr, **kw).fit(np.repeat(X, k, 0), np.repeat(y, k), np.repeat(g, k))
    np.testing.assert_allclose(a.weights_, b.weights_, atol=1e-5)
    np.testing.assert_allclose(a.group_risks_, b.group_risks_, atol=1e-5)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-5)
    # ignoring the weights is detected
    c = MixMax(lr, **kw).fit(X, y, g)
    assert np.abs(c.weights_ - b.weights_).max() > 1e-3


def test_bad_labels_and_groups():
    X, y, g = _data(60)
    mm = MixMax(LogisticRegression(), max_steps=5)
    with pytest.raises(ValueError, match="NaN"):
        mm.fit(X, np.where(np.arange(60) == 3, np.nan, y.astype(float)), g)
    with pytest.raises(ValueError, match="missing"):
        mm.fit(X, np.array(["a", "b"] * 29 + [None, "a"], dtype=object), g)
    with pytest.raises(ValueError, match="missing.*row 5"):
        mm.fit(X, y, np.where(np.arange(60) == 5, np.nan, g.astype(float)))
    with pytest.raises(ValueError, match="missing"):
        mm.fit(X, y, np.array([None] + ["a"] * 59, dtype=object))
    with pytest.raises(ValueError, match="whole numbers"):
        mm.fit(X, y, g + 0.5)
    with pytest.raises(ValueError, match="Unknown label type"):
        mm.fit(X, np.linspace(0, 1, 60), g)


@pytest.mark.parametrize("lam", [[0.5, -0.1, 0.6], [0.5, np.nan, 0.5], [0.0, 0.0, 0.0]])
def test_group_sample_weight_rejects_bad_lambda(lam):
    with pytest.raises(ValueError, match="nonnegative"):
        group_sample_weight(np.array([0, 1, 2, 2]), lam)


def test_separable_groups_warn_and_entropy_interpolates():
    """Groups far apart in x: f_lambda is each row's own group model for every interior lambda, so the risks are
    constant. The unregularised solution is the vertex of the hardest group; with tau > 0 the closed form is
    softmax(R / tau)."""
    X, y, g = _data(300, shift=30.0)
    with pytest.warns(SeparableGroupsWarning, match="separable"):
        mm = MixMax(LogisticRegression(), bandwidth=0.1, entropy=0.0, tol=1e-8).fit_weights(X, y, g)
    assert mm.separation_ > 10
    assert mm.weights_.max() > 0.999 and np.argmax(mm.weights_) == np.argmax(mm.group_risks_)
    tau = 0.2
    with pytest.warns(SeparableGroupsWarning):
        reg = MixMax(LogisticRegression(), bandwidth=0.1, entropy=tau, tol=1e-12, max_steps=20000).fit_weights(X, y, g)
    R = reg.group_risks_
    np.testing.assert_allclose(reg.weights_, np.exp(R / tau) / np.exp(R / tau).sum(), atol=1e-8)
    # overlapping groups: no warning
    X, y, g = _data(300, shift=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeparableGroupsWarning)
        MixMax(LogisticRegression(), max_steps=20).fit_weights(X, y, g)
