"""The fused Triton KDE equals the torch reference (interpreted on CPU), forward and backward, odd shapes."""

import numpy as np
import pytest
import torch

from iclr25.mixmax import GaussianKDE
from iclr25.mixmax.kernels import kde_log_density, kde_reference
from iclr25.shared.testing import KernelConformance

H = 0.8


class TestKDEKernel(KernelConformance):
    shapes = [(1, 1, 1), (17, 33, 3), (5, 40, 19), (33, 7, 2)]  # (M queries, n train, d)
    dtypes = (torch.float32,)
    differentiable = True
    grad_argnums = (0,)
    tolerances = {torch.float32: (1e-4, 1e-4)}

    def make_inputs(self, shape, dtype, device):
        m, n, d = shape
        g = torch.Generator().manual_seed(m * 1000 + n * 10 + d)
        q = torch.randn(m, d, generator=g, dtype=dtype).to(device).requires_grad_(True)
        t = torch.randn(n, d, generator=g, dtype=dtype).to(device)
        return q, t

    def reference(self, q, t):
        return kde_reference(q, t, H)

    def kernel(self, q, t):
        return kde_log_density(q, t, H, backend="triton")

    def dispatch(self, q, t):
        return kde_log_density(q, t, H)


@pytest.mark.triton
def test_far_queries_stay_finite():
    """Queries far from every training point: the streaming log-sum-exp must not underflow to -inf."""
    t = torch.randn(20, 2)
    q = torch.full((3, 2), 40.0)
    out = kde_log_density(q, t, 0.3, backend="triton")
    ref = kde_reference(q.double(), t.double(), 0.3).float()
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-2)


@pytest.mark.triton
def test_gaussian_kde_triton_backend_float64_input():
    X = torch.randn(25, 3, dtype=torch.float64)
    Q = torch.randn(9, 3, dtype=torch.float64)
    a = GaussianKDE("scott", backend="triton").fit(X).log_density(Q)
    b = GaussianKDE("scott", backend="torch").fit(X).log_density(Q)
    assert a.dtype == torch.float64
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)


@pytest.mark.triton
def test_kernel_input_errors():
    with pytest.raises(ValueError, match="queries only"):
        kde_log_density(torch.randn(2, 2), torch.randn(3, 2, requires_grad=True), 1.0, backend="triton")
    with pytest.raises(ValueError, match="d <= 256"):
        kde_log_density(torch.randn(2, 300), torch.randn(3, 300), 1.0, backend="triton")


def test_dispatch_errors():
    with pytest.raises(ValueError, match="equal d"):
        kde_log_density(torch.randn(2, 2), torch.randn(3, 3), 1.0)
    with pytest.raises(ValueError, match="bandwidth"):
        kde_log_density(torch.randn(2, 2), torch.randn(3, 2), 0.0)
    with pytest.raises(TypeError, match="torch tensors"):
        kde_log_density([[0.0]], torch.randn(3, 1), 1.0)
    with pytest.raises(ValueError, match="at least one row"):
        kde_log_density(torch.randn(2, 2), torch.randn(0, 2), 1.0)


@pytest.mark.gpu
def test_triton_on_cuda_matches_reference_large():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3001, 24, generator=g).cuda()
    t = torch.randn(5003, 24, generator=g).cuda()
    torch.testing.assert_close(kde_log_density(q, t, 0.9), kde_reference(q, t, 0.9), rtol=1e-4, atol=1e-4)


def _small_groups(n=20):
    from iclr25.mixmax.data import make_gaussian_groups

    return make_gaussian_groups().sample(n, seed=5)


@pytest.mark.triton
def test_mixmax_device_routes_kde_to_triton():
    """MixMax(kde_backend="triton") runs the fused kernel (interpreted here) and gives the float64 torch answer to
    fp32 accuracy."""
    from sklearn.linear_model import LogisticRegression

    from iclr25.mixmax import MixMax

    d = _small_groups()
    kw = dict(max_steps=200, tol=1e-9, device="cpu")
    a = MixMax(LogisticRegression(), kde_backend="triton", **kw).fit_weights(d.X, d.y, d.groups)
    b = MixMax(LogisticRegression(), kde_backend="torch", **kw).fit_weights(d.X, d.y, d.groups)
    dens = a.fold_models_[0][1]
    assert all(k.backend == "triton" for k in dens.kdes_)
    assert np.abs(a.cache_.log_px - b.cache_.log_px).max() > 0  # fp32 kernel really ran (not the float64 path)
    np.testing.assert_allclose(a.cache_.log_px, b.cache_.log_px, atol=1e-3)
    np.testing.assert_allclose(a.weights_, b.weights_, atol=1e-4)


@pytest.mark.gpu
def test_mixmax_on_cuda_matches_cpu():
    from sklearn.linear_model import LogisticRegression

    from iclr25.mixmax import MixMax

    d = _small_groups(1500)
    a = MixMax(LogisticRegression(), device="cuda").fit_weights(d.X, d.y, d.groups)
    b = MixMax(LogisticRegression()).fit_weights(d.X, d.y, d.groups)
    np.testing.assert_allclose(a.cache_.log_px, b.cache_.log_px, atol=1e-3)
    np.testing.assert_allclose(a.weights_, b.weights_, atol=1e-4)
