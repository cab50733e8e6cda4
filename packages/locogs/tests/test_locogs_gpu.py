"""On a CUDA device: the compiled Triton kernels against the torch references at a realistic size."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25.locogs import HashGridEncoding, rasterize
from iclr25.locogs.camera import intrinsics, look_at
from iclr25.shared.testing import assert_close_ratio


@pytest.mark.gpu
@pytest.mark.triton
def test_triton_rasterizer_matches_reference_on_cuda():
    g = torch.Generator().manual_seed(0)
    n, w, h = 5000, 200, 150
    args = [
        (torch.rand(n, 3, generator=g) * 2 - 1),
        torch.randn(n, 4, generator=g),
        torch.rand(n, 3, generator=g) * 0.05 + 0.005,
        torch.rand(n, generator=g) * 0.9 + 0.05,
        torch.randn(n, 16, 3, generator=g) * 0.2,
    ]
    viewmat = look_at((0.0, -3.5, 1.0)).cuda()
    f = 0.5 * w / math.tan(math.radians(25))
    K = intrinsics(f, f, w / 2, h / 2).cuda()
    out = {}
    for be in ("torch", "triton"):
        leaves = [a.cuda().requires_grad_(True) for a in args]
        img, alpha = rasterize(*leaves, viewmat, K, w, h, sh_degree=3, backend=be)
        (img.square().sum() + alpha.sum()).backward()
        out[be] = (img.detach(), alpha.detach(), [x.grad for x in leaves])
    assert_close_ratio(out["torch"][0], out["triton"][0], ratio=1e-3, atol=1e-3, name="image")
    assert_close_ratio(out["torch"][1], out["triton"][1], ratio=1e-3, atol=1e-3, name="alpha")
    for r, k in zip(out["torch"][2], out["triton"][2]):
        assert_close_ratio(r, k, ratio=5e-3, atol=1e-3, name="grad")


@pytest.mark.gpu
@pytest.mark.triton
def test_triton_hashgrid_matches_reference_on_cuda():
    enc = HashGridEncoding(log2_hashmap_size=19).cuda()
    with torch.no_grad():
        enc.table.normal_()
    pts = torch.rand(50_000, 3, device="cuda")
    up = torch.randn(50_000, 32, device="cuda")
    res = []
    for be in ("torch", "triton"):
        enc.backend = be
        enc.table.grad = None
        y = enc(pts)
        y.backward(up)
        res.append((y.detach(), enc.table.grad.clone()))
    assert_close_ratio(res[0][0], res[1][0], ratio=1e-5, atol=1e-5, name="encoding")
    assert_close_ratio(res[0][1], res[1][1], ratio=1e-4, atol=1e-4, name="table grad")
