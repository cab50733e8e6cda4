"""Triton kernels (interpreted on CPU) against their pure-torch references, forward and backward."""

from __future__ import annotations

import pytest
import torch

from iclr25.locogs import rasterize
from iclr25.locogs.kernels import rasterize_pixels, rasterize_reference
from iclr25.locogs.oracles import random_scene, tiny_camera
from iclr25.locogs.projection import project_gaussians
from iclr25.shared.testing import assert_close_ratio


def _projected(n, w, h, seed):
    means, quats, scales, opac, colors = random_scene(n, seed, dtype=torch.float32)
    viewmat, K = tiny_camera(w, h, dtype=torch.float32)
    p = project_gaussians(means, quats, scales, viewmat, K, w, h)
    return p, colors, opac


@pytest.mark.triton
@pytest.mark.parametrize("w,h,n,seed", [(16, 16, 12, 0), (24, 20, 9, 1), (17, 9, 7, 2), (33, 18, 14, 3)])
def test_rasterize_triton_matches_reference(w, h, n, seed):
    p, colors, opac = _projected(n, w, h, seed)
    bg = torch.tensor([0.1, 0.5, 0.2])
    base = [p.means2d.detach(), p.conics.detach(), colors, opac, bg]
    g = torch.Generator().manual_seed(seed)
    up_img, up_alpha = torch.randn(h, w, 3, generator=g), torch.randn(h, w, generator=g)
    results = []
    for backend in ("torch", "triton"):
        leaves = [t.clone().requires_grad_(True) for t in base]
        m2, con, col, op, b = leaves
        img, alpha = rasterize_pixels(m2, con, col, op, p.depths, p.radii, w, h, b, backend=backend)
        ((img * up_img).sum() + (alpha * up_alpha).sum()).backward()
        results.append((img.detach(), alpha.detach(), [t.grad for t in leaves]))
    (ri, ra, rg), (ki, ka, kg) = results
    assert ra.max() > 0.5, "scene too sparse"
    assert_close_ratio(ri, ki, ratio=1e-5, atol=2e-6, name="image")
    assert_close_ratio(ra, ka, ratio=1e-5, atol=2e-6, name="alpha")
    for name, r, k in zip(("means2d", "conics", "colors", "opacities", "background"), rg, kg):
        assert_close_ratio(r, k, ratio=1e-4, atol=1e-5, name=f"grad {name}")


@pytest.mark.triton
def test_rasterize_triton_full_pipeline_with_sh():
    means, quats, scales, opac, sh = random_scene(10, 4, dtype=torch.float32, sh_degree=2)
    viewmat, K = tiny_camera(18, 14, dtype=torch.float32)
    out = {}
    for backend in ("torch", "triton"):
        leaves = [t.clone().requires_grad_(True) for t in (means, quats, scales, opac, sh)]
        img, alpha = rasterize(*leaves, viewmat, K, 18, 14, sh_degree=2, backend=backend)
        (img.square().sum() + alpha.sum()).backward()
        out[backend] = (img.detach(), [t.grad for t in leaves])
    assert_close_ratio(out["torch"][0], out["triton"][0], ratio=1e-5, atol=2e-6, name="image")
    for r, k in zip(out["torch"][1], out["triton"][1]):
        assert_close_ratio(r, k, ratio=1e-4, atol=1e-5, name="grad")


def test_auto_backend_on_cpu_is_reference():
    p, colors, opac = _projected(8, 16, 16, 0)
    a = rasterize_pixels(p.means2d, p.conics, colors, opac, p.depths, p.radii, 16, 16)
    b = rasterize_reference(p.means2d, p.conics, colors, opac, p.depths, p.radii, 16, 16)
    torch.testing.assert_close(a[0], b[0], atol=0, rtol=0)


@pytest.mark.triton
@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("n", [0, 1])
def test_empty_or_fully_culled_scene_gives_background(backend, n):
    viewmat, K = tiny_camera(10, 8, dtype=torch.float32)
    means = torch.zeros(n, 3)
    means[:, 1] = -10.0  # behind the camera
    bg = torch.tensor([0.2, 0.3, 0.4])
    img, alpha = rasterize(means, torch.ones(n, 4), torch.full((n, 3), 0.1), torch.full((n,), 0.5),
                           torch.ones(n, 3), viewmat, K, 10, 8, background=bg, backend=backend)  # fmt: skip
    torch.testing.assert_close(img, bg.expand(8, 10, 3))
    assert float(alpha.abs().max()) == 0.0
