"""GaussianKDE equals sklearn's KernelDensity.score_samples and a brute-force numpy oracle."""

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from sklearn.neighbors import KernelDensity

from iclr25.mixmax import GaussianKDE, GroupKDE
from iclr25.mixmax.density import bandwidth_rule


def _brute(X, Q, h):
    d2 = ((Q[:, None, :] - X[None]) ** 2).sum(-1)
    return logsumexp(-d2 / (2 * h * h), axis=1) - np.log(len(X)) - 0.5 * X.shape[1] * np.log(2 * np.pi * h * h)


@pytest.mark.parametrize("bandwidth", ["scott", "silverman", 0.37])
@pytest.mark.parametrize("shape", [(1, 1), (57, 3), (203, 5)])
def test_matches_sklearn_and_brute_force(bandwidth, shape):
    rng = np.random.default_rng(0)
    X = rng.normal(size=shape)
    Q = rng.normal(size=(31, shape[1]))
    kde = GaussianKDE(bandwidth).fit(X)
    sk = KernelDensity(kernel="gaussian", bandwidth=bandwidth).fit(X)
    assert kde.bandwidth_ == pytest.approx(sk.bandwidth_)
    ours = kde.log_density(Q)
    np.testing.assert_allclose(ours, _brute(X, Q, kde.bandwidth_), atol=1e-10)
    # sklearn's tree is exact up to tiny relative error in the bulk of the data
    bulk = ours > ours.max() - 20
    np.testing.assert_allclose(ours[bulk], sk.score_samples(Q)[bulk], atol=1e-8)


def test_bandwidth_rules():
    assert bandwidth_rule("scott", 100, 2) == pytest.approx(100 ** (-1 / 6))
    assert bandwidth_rule("silverman", 100, 2) == pytest.approx((100 * 4 / 4) ** (-1 / 6))
    with pytest.raises(ValueError, match="bandwidth"):
        bandwidth_rule("wide", 10, 1)
    with pytest.raises(ValueError, match="bandwidth"):
        GaussianKDE(-1.0)


def test_tensor_in_tensor_out_and_grad():
    X = torch.randn(40, 2, dtype=torch.float64)
    q = torch.randn(7, 2, dtype=torch.float64, requires_grad=True)
    out = GaussianKDE(0.5).fit(X).log_density(q)
    assert isinstance(out, torch.Tensor) and out.shape == (7,)
    out.sum().backward()
    # grad of log p at q: (weighted mean of the data - q) / h^2
    w = torch.softmax(-(torch.cdist(q.detach(), X) ** 2) / (2 * 0.25), dim=1)
    np.testing.assert_allclose(q.grad, (w @ X - q.detach()) / 0.25, atol=1e-10)


def test_errors():
    kde = GaussianKDE()
    with pytest.raises(ValueError, match="not fitted"):
        kde.log_density(np.zeros((1, 1)))
    with pytest.raises(ValueError, match="2-D"):
        kde.fit(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        kde.fit(np.array([[np.nan]]))
    kde.fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="features"):
        kde.log_density(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="backend"):
        GaussianKDE(backend="cuda")


def test_group_kde_standardisation_cancels_in_posterior():
    """A common affine map shifts every group's log-density by the same constant: differences are unchanged
    when the bandwidth is scaled with the data."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 2)) * [3.0, 0.5] + [10, -2]
    g = np.repeat([0, 1, 2], 100)
    Q = X[::7]
    a = GroupKDE(0.4, standardize=True).fit(X, g, 3).log_density_matrix(Q)
    sd = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / sd
    b = np.stack([GaussianKDE(0.4).fit(Z[g == k]).log_density((Q - X.mean(axis=0)) / sd) for k in range(3)], 1)
    np.testing.assert_allclose(a, b, atol=1e-10)
    np.testing.assert_allclose(np.diff(a, axis=1), np.diff(b, axis=1), atol=1e-10)


def test_bad_kde_inputs():
    kde = GaussianKDE(0.5).fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="NaN.*row 1, column 0"):
        kde.log_density(np.array([[0.0, 0.0], [np.nan, 1.0]]))
    with pytest.raises(ValueError, match="NaN"):
        kde.log_density(torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(TypeError, match="floating-point"):
        kde.log_density(torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match="floating-point"):
        GaussianKDE(0.5).fit(torch.tensor([[1, 2], [3, 4]]))


def test_fp32_far_from_origin_is_centred():
    """fp32 data at offset 1e4: the expanded distance ||x||^2 + ||t||^2 - 2<x, t> loses ~1e8 * 6e-8 per pair;
    the dispatcher centres both inputs first. Oracle: float64 brute force on the same fp32 values."""
    from iclr25.mixmax.kernels import kde_log_density, kde_reference

    g = torch.Generator().manual_seed(0)
    t = (torch.randn(200, 3, generator=g) * 0.5 + 1e4).float()
    q = (torch.randn(50, 3, generator=g) * 0.5 + 1e4).float()
    exact = _brute(t.double().numpy(), q.double().numpy(), 0.3)
    ours = kde_log_density(q, t, 0.3).double().numpy()
    assert np.abs(ours - exact).max() < 1e-3
    # the uncentred computation (the mutant this test catches) is off by nats
    raw = kde_reference(q, t, 0.3).double().numpy()
    assert np.abs(raw - exact).max() > 0.5


def test_weighted_kde_equals_replication():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    k = rng.integers(1, 4, 40)
    Q = rng.normal(size=(9, 2))
    a = GaussianKDE(0.4).fit(X, sample_weight=k).log_density(Q)
    np.testing.assert_allclose(a, _brute(np.repeat(X, k, 0), Q, 0.4), atol=1e-10)
    with pytest.raises(ValueError, match="nonnegative"):
        GaussianKDE(0.4).fit(X, sample_weight=-k)


def test_streaming_tiles_match_one_tile():
    """The chunked reference (tiles of queries x training rows, combined with logaddexp) equals brute force."""
    from iclr25.mixmax.kernels import kde_reference

    rng = np.random.default_rng(1)
    X, Q = rng.normal(size=(301, 4)), rng.normal(size=(77, 4))
    out = kde_reference(torch.from_numpy(Q), torch.from_numpy(X), 0.6, query_chunk=10, train_chunk=32)
    np.testing.assert_allclose(out.numpy(), _brute(X, Q, 0.6), atol=1e-10)
