"""Triton kernels against their torch references (interpreted on CPU) on tiny odd shapes."""

from __future__ import annotations

import pytest
import torch

from iclr25.shared.testing import KernelConformance
from iclr25.syllablelm.kernels import (
    blocksums,
    blocksums_reference,
    kmeans_assign,
    kmeans_assign_reference,
    segmental_dp,
    segmental_dp_reference,
)
from iclr25.syllablelm.segment import ncut_costs, sse_costs


def explicit_blocksums(m, s):
    bsz, n, _ = m.shape
    out = torch.zeros(bsz, n + 1, s + 1, dtype=m.dtype)
    for q in range(1, n + 1):
        for k in range(1, min(q, s) + 1):
            out[:, q, k] = m[:, q - k : q, q - k : q].sum((1, 2))
    return out


@pytest.mark.parametrize("n,s", [(7, 3), (11, 5)])
def test_blocksums_reference_equals_explicit_loop(n, s):
    m = torch.randn(2, n, n, dtype=torch.float64)
    torch.testing.assert_close(blocksums_reference(m, s), explicit_blocksums(m, s))


@pytest.mark.triton
@pytest.mark.parametrize("n,s,dtype", [(7, 3, torch.float32), (13, 5, torch.float64)])
def test_blocksums_triton_forward_backward(n, s, dtype):
    m = torch.randn(2, n, n, dtype=dtype, requires_grad=True)
    out = blocksums(m, s, backend="triton")
    ref = blocksums_reference(m, s)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(ref)
    (gk,) = torch.autograd.grad(out, m, g)
    (gr,) = torch.autograd.grad(ref, m, g)
    torch.testing.assert_close(gk, gr)
    # non-contiguous input
    mt = m.detach().transpose(1, 2)
    torch.testing.assert_close(blocksums(mt, s, backend="triton"), blocksums_reference(mt, s), rtol=1e-5, atol=1e-5)


@pytest.mark.triton
@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_segmental_dp_triton_equals_reference(exact, dtype):
    torch.manual_seed(3)
    x = torch.randn(3, 17, 4)
    costs = sse_costs(x, max_len=5, min_len=2, lengths=[17, 13, 9]).to(dtype)
    t_ref, b_ref = segmental_dp_reference(costs, 7, exact)
    t_k, b_k = segmental_dp(costs, 7, exact, backend="triton")
    torch.testing.assert_close(t_k, t_ref, rtol=0, atol=0)
    assert torch.equal(b_k, b_ref)


@pytest.mark.triton
def test_segmental_dp_ties_broken_identically():
    # an affinity of all ones makes many segmentations cost the same
    costs = ncut_costs(torch.ones(11, 11), max_len=4).float()
    costs = torch.round(costs * 4) / 4
    t_ref, b_ref = segmental_dp_reference(costs, 6, True)
    t_k, b_k = segmental_dp(costs, 6, True, backend="triton")
    assert torch.equal(b_k, b_ref)
    torch.testing.assert_close(t_k, t_ref, rtol=0, atol=0)


@pytest.mark.triton
@pytest.mark.parametrize("n,k,d", [(19, 5, 3), (33, 70, 21)])
def test_kmeans_assign_triton(n, k, d):
    torch.manual_seed(n)
    x = torch.randn(n, d)
    c = torch.randn(k, d)
    ref = kmeans_assign_reference(x, c)
    out = kmeans_assign(x, c, backend="triton")
    dist = torch.cdist(x.double(), c.double()) ** 2
    rows = torch.arange(n)
    # equal, except possibly on near-ties where both picks are within rounding of the minimum
    assert torch.allclose(dist[rows, out], dist[rows, ref], atol=1e-4)
    assert (out == ref).float().mean() >= 0.9
    # exact ties go to the lowest index
    cc = torch.cat([c[:2], c[:2]])
    assert (kmeans_assign(x, cc, backend="triton") < 2).all()


def test_auto_dispatch_on_cpu_uses_reference():
    x = torch.randn(9, 3)
    c = torch.randn(4, 3)
    assert torch.equal(kmeans_assign(x, c), kmeans_assign_reference(x, c))
    with pytest.raises(ValueError):
        kmeans_assign(x, torch.randn(4, 2))


@pytest.mark.triton
def test_dispatchers_not_shadowed_by_kernel_modules():
    import iclr25.syllablelm.kernels as k
    from iclr25.syllablelm.kernels import reference

    kmeans_assign(torch.randn(3, 2), torch.randn(2, 2), backend="triton")
    segmental_dp(sse_costs(torch.randn(6, 2), 3, 1), 2, backend="triton")
    blocksums(torch.randn(1, 4, 4), 2, backend="triton")
    for name in ("kmeans_assign", "segmental_dp", "blocksums"):
        assert callable(getattr(k, name))
        assert callable(getattr(reference, f"{name}_kernel_reference"))


class TestBlocksumsConformance(KernelConformance):
    shapes = [(1, 1), (2, 5), (1, 9)]
    dtypes = (torch.float32, torch.float64)
    differentiable = True

    def make_inputs(self, shape, dtype, device):
        b, n = shape
        return (torch.randn(b, n, n, dtype=dtype, device=device, requires_grad=True),)

    def reference(self, m):
        return blocksums_reference(m, 3)

    def kernel(self, m):
        return blocksums(m, 3, backend="triton")

    def dispatch(self, m):
        return blocksums(m, 3)
