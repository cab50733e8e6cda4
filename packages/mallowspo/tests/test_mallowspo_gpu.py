"""CUDA checks (skipped without a GPU): the Triton kernels natively at LLM vocabulary sizes in bf16, and auto
dispatch picking Triton on CUDA tensors."""

import pytest
import torch

from iclr25.mallowspo import sequence_entropy, sequence_logps
from iclr25.mallowspo.kernels import (
    fused_logp_entropy_reference,
    fused_selective_logp_reference,
    logp_entropy,
    selective_logp,
)

pytestmark = [pytest.mark.gpu, pytest.mark.triton]


@pytest.mark.parametrize("vocab", [32000, 128256, 50257])
def test_kernels_native_bf16(vocab):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(257, vocab, device="cuda", generator=g) * 3).bfloat16()
    y = torch.randint(0, vocab, (257,), device="cuda", generator=g)
    y[5] = -100
    x[7, :100] = float("-inf")
    ref = fused_logp_entropy_reference(x, y)
    out = logp_entropy(x, y, backend="triton")
    for r, o in zip(ref, out):
        torch.testing.assert_close(o, r, atol=2e-4, rtol=2e-4)
    xr = x.clone().requires_grad_(True)
    xk = x.clone().requires_grad_(True)
    w = torch.randn(257, device="cuda")
    (fused_selective_logp_reference(xr, y) * w).sum().backward()
    (selective_logp(xk, y, backend="triton") * w).sum().backward()
    torch.testing.assert_close(xk.grad.float(), xr.grad.float(), atol=1e-2, rtol=1e-2)


def test_auto_dispatch_on_cuda_matches_cpu():
    x = torch.randn(3, 17, 1003)
    labels = torch.randint(0, 1003, (3, 17))
    labels[:, :4] = -100
    cpu = (sequence_logps(x, labels), sequence_entropy(x, labels))
    gpu = (sequence_logps(x.cuda(), labels.cuda()), sequence_entropy(x.cuda(), labels.cuda()))
    for c, g in zip(cpu, gpu):
        torch.testing.assert_close(g.cpu(), c, atol=1e-4, rtol=1e-4)
