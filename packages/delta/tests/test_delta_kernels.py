"""Kernels vs their references (Triton interpreter on CPU), brute force and closed-form oracles."""

import math

import pytest
import torch

from iclr25.delta.kernels import convex_upsample_reference, corr4d_local_reference, local_corr4d, upsample_convex
from iclr25.shared.testing import KernelConformance

torch.set_num_threads(1)


def _corr_inputs(b, t, h, w, c, n, r, dtype=torch.float32, device="cpu", integer=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    fmap = torch.randn(b, t, h, w, c, generator=g, dtype=dtype).to(device).requires_grad_(True)
    if integer:
        xy = torch.stack([torch.randint(0, w, (b, t, n), generator=g), torch.randint(0, h, (b, t, n), generator=g)], -1)
        coords = xy.to(dtype)
    else:  # include positions outside the map to exercise border padding
        coords = torch.stack(
            [torch.rand(b, t, n, generator=g) * (w + 3) - 1.5, torch.rand(b, t, n, generator=g) * (h + 3) - 1.5], -1
        )
        coords = coords.to(dtype)
    supp = torch.randn(b, n, (2 * r + 1) ** 2, c, generator=g, dtype=dtype).to(device).requires_grad_(True)
    return fmap, coords.to(device), supp, r


class TestCorr4dLocal(KernelConformance):
    shapes = [(1, 1, 5, 7, 3, 2, 1), (2, 2, 6, 5, 17, 3, 2), (1, 3, 4, 9, 1, 1, 1), (1, 1, 8, 8, 70, 2, 3)]
    differentiable = True

    def make_inputs(self, shape, dtype, device):
        return _corr_inputs(*shape, dtype=dtype, device=device)

    def reference(self, fmap, coords, supp, r):
        return corr4d_local_reference(fmap, coords, supp, r)

    def kernel(self, fmap, coords, supp, r):
        return local_corr4d(fmap, coords, supp, r, backend="triton")

    def dispatch(self, fmap, coords, supp, r):
        return local_corr4d(fmap, coords, supp, r)


def _brute_corr(fmap, coords, supp, r):
    b, t, h, w, c = fmap.shape
    n = coords.shape[2]
    p = 2 * r + 1
    out = torch.zeros(b, t, n, p * p, p * p, dtype=torch.float64)
    for bi in range(b):
        for ti in range(t):
            for ni in range(n):
                x, y = (int(v) for v in coords[bi, ti, ni])
                for k in range(p * p):
                    tx = min(max(x + k // p - r, 0), w - 1)
                    ty = min(max(y + k % p - r, 0), h - 1)
                    for j in range(p * p):
                        out[bi, ti, ni, k, j] = float(fmap[bi, ti, ty, tx] @ supp[bi, ni, j]) / math.sqrt(c)
    return out


@pytest.mark.triton
def test_corr4d_equals_brute_force_on_integer_coordinates():
    fmap, coords, supp, r = _corr_inputs(1, 2, 5, 6, 4, 3, 1, integer=True, seed=3)
    brute = _brute_corr(fmap.detach(), coords, supp.detach(), r)
    ref = corr4d_local_reference(fmap, coords, supp, r).detach().double()
    tri = local_corr4d(fmap, coords, supp, r, backend="triton").detach().double()
    assert torch.allclose(ref, brute, atol=1e-5)
    assert torch.allclose(tri, brute, atol=1e-5)


@pytest.mark.triton
def test_corr4d_subpixel_matches_manual_bilinear():
    fmap, _, supp, r = _corr_inputs(1, 1, 6, 6, 3, 1, 1, seed=5)
    coords = torch.tensor([[[[2.25, 3.5]]]])
    x, y = 2.25, 3.5
    f = fmap.detach()[0, 0]
    p = 2 * r + 1
    manual = torch.zeros(p * p, p * p)
    for k in range(p * p):
        tx, ty = x + k // p - r, y + k % p - r
        x0, y0 = math.floor(tx), math.floor(ty)
        wx, wy = tx - x0, ty - y0
        v = (
            (1 - wx) * (1 - wy) * f[y0, x0]
            + wx * (1 - wy) * f[y0, x0 + 1]
            + (1 - wx) * wy * f[y0 + 1, x0]
            + wx * wy * f[y0 + 1, x0 + 1]
        )
        manual[k] = supp.detach()[0, 0] @ v / math.sqrt(3)
    tri = local_corr4d(fmap, coords, supp, r, backend="triton").detach()[0, 0, 0]
    assert torch.allclose(tri, manual, atol=1e-5)
    assert torch.allclose(corr4d_local_reference(fmap, coords, supp, r).detach()[0, 0, 0], manual, atol=1e-5)


@pytest.mark.triton
def test_triton_path_does_not_call_the_reference(monkeypatch):
    import iclr25.delta.kernels as K

    def boom(*a, **k):
        raise AssertionError("reference called on the triton path")

    monkeypatch.setattr(K, "corr4d_local_reference", boom)
    monkeypatch.setattr(K, "convex_upsample_reference", boom)
    fmap, coords, supp, r = _corr_inputs(1, 1, 4, 4, 2, 1, 1)
    assert torch.isfinite(K.local_corr4d(fmap, coords, supp, r, backend="triton")).all()
    x = torch.randn(1, 2, 2, 3)
    wts = torch.randn(1, 9, 4, 6).softmax(1)
    assert K.upsample_convex(x, wts, 2, 3, backend="triton").shape == (1, 2, 4, 6)


def test_corr4d_bad_shapes():
    fmap, coords, supp, r = _corr_inputs(1, 1, 4, 4, 2, 1, 1)
    with pytest.raises(ValueError, match="supp"):
        local_corr4d(fmap, coords, supp, r + 1)
    with pytest.raises(TypeError):
        local_corr4d(fmap.long(), coords, supp, r)


class TestConvexUpsample(KernelConformance):
    shapes = [(1, 1, 1, 1, 2, 3), (1, 2, 2, 3, 4, 5), (1, 3, 3, 2, 3, 3), (1, 33, 2, 2, 2, 3)]
    differentiable = True

    def make_inputs(self, shape, dtype, device):
        b, c, h, w, f, k = shape
        g = torch.Generator().manual_seed(1)
        x = torch.randn(b, c, h, w, generator=g, dtype=dtype).to(device).requires_grad_(True)
        wts = torch.randn(b, k * k, h * f, w * f, generator=g, dtype=dtype).softmax(1).to(device).requires_grad_(True)
        return x, wts, f, k

    def reference(self, x, wts, f, k):
        return convex_upsample_reference(x, wts, f, k)

    def kernel(self, x, wts, f, k):
        return upsample_convex(x, wts, f, k, backend="triton")

    def dispatch(self, x, wts, f, k):
        return upsample_convex(x, wts, f, k)


@pytest.mark.triton
@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_convex_upsample_constants_borders_and_nearest(backend):
    f, k, h, w = 4, 5, 5, 6
    wts = torch.randn(1, k * k, h * f, w * f, generator=torch.Generator().manual_seed(0)).softmax(1)
    out = upsample_convex(torch.full((1, 1, h, w), 3.0), wts, f, k, backend=backend)[0, 0]
    inner = out[2 * f : (h - 2) * f, 2 * f : (w - 2) * f]
    assert torch.allclose(inner, torch.full_like(inner, 3.0), atol=1e-5)  # weights sum to 1
    assert (out[:f] < 3.0 - 1e-4).all()  # zero padding shrinks the border towards 0 (official quirk)
    onehot = torch.zeros(1, k * k, h * f, w * f)
    onehot[:, (k * k) // 2] = 1.0
    x = torch.randn(1, 2, h, w)
    near = torch.nn.functional.interpolate(x, scale_factor=f, mode="nearest")
    assert torch.allclose(upsample_convex(x, onehot, f, k, backend=backend), near)
