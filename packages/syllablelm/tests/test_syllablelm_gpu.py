"""GPU checks (skipped without CUDA): compiled kernels equal the references."""

from __future__ import annotations

import pytest
import torch

from iclr25.syllablelm.kernels import blocksums, kmeans_assign, segmental_dp
from iclr25.syllablelm.segment import sse_costs


@pytest.mark.gpu
@pytest.mark.triton
def test_kernels_on_cuda():
    torch.manual_seed(0)
    costs = sse_costs(torch.randn(5, 301, 16), max_len=35, min_len=3).float().cuda()
    t_ref, b_ref = segmental_dp(costs, 60, exact=False, backend="torch")
    t_k, b_k = segmental_dp(costs, 60, exact=False, backend="triton")
    assert torch.equal(b_k, b_ref) and torch.equal(t_k, t_ref)
    a = torch.rand(3, 97, 97, device="cuda", dtype=torch.float64)
    torch.testing.assert_close(blocksums(a, 49, backend="triton"), blocksums(a, 49, backend="torch"))
    x, c = torch.randn(1000, 96, device="cuda"), torch.randn(777, 96, device="cuda")
    agree = (kmeans_assign(x, c, backend="triton") == kmeans_assign(x, c, backend="torch")).float().mean()
    assert agree > 0.99
