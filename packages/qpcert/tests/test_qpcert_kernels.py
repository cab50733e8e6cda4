"""The Triton batched box-QP kernel against its torch reference (interpreter on CPU)."""

import pytest
import torch

from iclr25.qpcert.kernels import box_qp
from iclr25.qpcert.kernels.reference import box_qp_reference
from iclr25.qpcert.svm import solve_batch
from iclr25.shared.testing import KernelConformance


def make_problem(b, m, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed + 31 * m + b)
    x = torch.randn(m, 3, generator=g, dtype=torch.float64)
    q = (x @ x.T + 0.05 * torch.eye(m, dtype=torch.float64)).to(dtype).to(device)
    y = torch.where(torch.rand(b, m, generator=g) < 0.5, -1.0, 1.0).to(dtype).to(device)
    a0 = (torch.rand(b, m, generator=g) * 0.3).to(dtype).to(device)
    return q, y, a0


class TestBoxQPKernel(KernelConformance):
    shapes = [(1, 1), (3, 7), (2, 19)]
    dtypes = (torch.float64, torch.float32)
    differentiable = False

    def make_inputs(self, shape, dtype, device):
        return make_problem(*shape, dtype, device)

    def reference(self, q, y, a0):
        return box_qp_reference(q, y, a0, 0.5, 2)

    def kernel(self, q, y, a0):
        return box_qp(q, y, a0, 0.5, 2, backend="triton")

    def dispatch(self, q, y, a0):
        return box_qp(q, y, a0, 0.5, 2)


@pytest.mark.triton
def test_exact_solver_on_the_triton_path_matches_the_torch_path():
    q, y, _ = make_problem(3, 6, torch.float64, "cpu", seed=3)
    tri = solve_batch(q, y, 2.0, sweeps=15, backend="triton")
    ref = solve_batch(q, y, 2.0, sweeps=15, backend="torch")
    assert bool(tri.converged.all()) and float(tri.kkt.max()) < 1e-9
    assert torch.allclose(tri.alpha, ref.alpha, atol=1e-9)


def test_reference_rejects_bad_shapes():
    q, y, a0 = make_problem(2, 5, torch.float64, "cpu")
    with pytest.raises(ValueError, match="square"):
        box_qp(q[:, :3], y, a0, 1.0, 1)
    with pytest.raises(ValueError, match="B, m"):
        box_qp(q, y[:, :3], a0, 1.0, 1)


@pytest.mark.gpu
def test_gpu_kernel_matches_reference_and_auto_dispatches_to_triton():
    q, y, a0 = make_problem(257, 21, torch.float64, "cuda", seed=5)
    a_ref, r_ref = box_qp_reference(q, y, a0, 1.0, 10)
    a_auto, r_auto = box_qp(q, y, a0, 1.0, 10)  # auto -> triton on CUDA
    assert torch.allclose(a_ref, a_auto, atol=1e-10) and torch.allclose(r_ref, r_auto, atol=1e-10)
    sol = solve_batch(q, y, 1.0)
    assert bool(sol.converged.all())
