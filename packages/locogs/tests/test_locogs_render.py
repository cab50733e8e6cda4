"""The splatting core against oracles: brute-force compositing, gradcheck, gsplat's projection and SH, closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr25.locogs import rasterize
from iclr25.locogs.binning import bin_gaussians
from iclr25.locogs.config import RasterConfig
from iclr25.locogs.kernels import rasterize_pixels
from iclr25.locogs.oracles import composite_brute, random_scene, tiny_camera
from iclr25.locogs.projection import covariance_3d, project_gaussians, quat_to_rotmat
from iclr25.locogs.sh import C0, C1, eval_sh, sh_basis


@pytest.mark.parametrize("seed,size", [(0, (16, 16)), (1, (24, 20)), (2, (13, 17))])
def test_reference_equals_brute_force(seed, size):
    w, h = size
    means, quats, scales, opac, colors = random_scene(40, seed)
    viewmat, K = tiny_camera(w, h)
    proj = project_gaussians(means, quats, scales, viewmat, K, w, h)
    assert (proj.radii[:3] == 0).all(), "behind-camera / off-screen Gaussians must be culled"
    bg = torch.tensor([0.2, 0.1, 0.4], dtype=torch.float64)
    img, alpha = rasterize_pixels(proj.means2d, proj.conics, colors, opac, proj.depths, proj.radii, w, h, bg)
    ref_img, ref_alpha = composite_brute(proj.means2d, proj.conics, colors, opac, proj.depths, proj.radii, w, h, bg)
    assert (ref_alpha > 0.5).any(), "scene too sparse to test compositing"
    torch.testing.assert_close(img, ref_img, atol=1e-9, rtol=0)
    torch.testing.assert_close(alpha, ref_alpha, atol=1e-9, rtol=0)


def test_early_termination_matches_brute_force():
    # many opaque overlapping Gaussians: transmittance must hit 1e-4 and stop exactly like the sequential loop
    n, w, h = 25, 16, 16
    g = torch.Generator().manual_seed(3)
    m2 = torch.tensor([8.0, 8.0], dtype=torch.float64) + torch.randn(n, 2, generator=g, dtype=torch.float64)
    conics = torch.tensor([[0.02, 0.0, 0.02]], dtype=torch.float64).repeat(n, 1)
    opac = torch.full((n,), 0.95, dtype=torch.float64)
    colors = torch.rand(n, 3, generator=g, dtype=torch.float64)
    depths = torch.rand(n, generator=g, dtype=torch.float64)
    radii = torch.full((n,), 30, dtype=torch.int32)
    img, alpha = rasterize_pixels(m2, conics, colors, opac, depths, radii, w, h)
    ref, ref_a = composite_brute(m2, conics, colors, opac, depths, radii, w, h)
    torch.testing.assert_close(img, ref, atol=1e-9, rtol=0)
    torch.testing.assert_close(alpha, ref_a, atol=1e-9, rtol=0)
    assert (ref_a > 1 - 1e-3).all()


def test_input_order_does_not_change_image():
    means, quats, scales, opac, colors = random_scene(40, 5)
    viewmat, K = tiny_camera(20, 18)
    img, a = rasterize(means, quats, scales, opac, colors, viewmat, K, 20, 18)
    perm = torch.randperm(40, generator=torch.Generator().manual_seed(1))
    img2, a2 = rasterize(means[perm], quats[perm], scales[perm], opac[perm], colors[perm], viewmat, K, 20, 18)
    torch.testing.assert_close(img, img2, atol=1e-12, rtol=0)
    torch.testing.assert_close(a, a2, atol=1e-12, rtol=0)


def test_gradcheck_compositing_fp64():
    means, quats, scales, opac, colors = random_scene(8, 7)
    viewmat, K = tiny_camera(8, 7)
    proj = project_gaussians(means, quats, scales, viewmat, K, 8, 7)
    cfg = RasterConfig(t_min=0.0)  # early termination off: the image is smooth in the parameters
    m2, con = proj.means2d.detach(), proj.conics.detach()
    depths, radii = proj.depths.detach(), proj.radii + 3  # margin so footprints do not move under perturbation
    bg = torch.tensor([0.3, 0.2, 0.1], dtype=torch.float64)
    inputs = [t.clone().requires_grad_(True) for t in (m2, con, colors, opac * 0.7, bg)]

    def fn(m, c, col, o, b):
        return rasterize_pixels(m, c, col, o, depths, radii, 8, 7, b, cfg)

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


def test_gradcheck_full_pipeline_fp64():
    means, quats, scales, opac, sh = random_scene(6, 11, sh_degree=1)
    means[:3] *= 0.1  # keep every Gaussian on screen
    viewmat, K = tiny_camera(7, 6)
    inputs = [t.clone().requires_grad_(True) for t in (means, quats, scales, opac * 0.6, sh)]

    def fn(m, q, s, o, c):
        img, alpha = rasterize(m, q, s, o, c, viewmat, K, 7, 6, sh_degree=1)
        return img, alpha

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-7, atol=1e-5, fast_mode=True)


def test_projection_matches_gsplat():
    torch_impl = pytest.importorskip("gsplat.cuda._torch_impl")
    means, quats, scales, _, _ = random_scene(200, 2)
    means = means * 2
    w, h = 40, 30
    viewmat, K = tiny_camera(w, h)
    proj = project_gaussians(means, quats, scales, viewmat, K, w, h, RasterConfig(near_plane=0.2))
    covars = covariance_3d(quats, scales)
    radii_g, means2d_g, depths_g, conics_g, _ = torch_impl._fully_fused_projection(
        means, covars, viewmat[None], K[None], w, h, eps2d=0.3, near_plane=0.2
    )
    vis = (proj.radii > 0) & (radii_g[0].reshape(200, -1).amax(-1) > 0)
    assert vis.sum() > 50
    torch.testing.assert_close(proj.means2d[vis], means2d_g[0][vis], atol=1e-10, rtol=0)
    torch.testing.assert_close(proj.conics[vis], conics_g[0][vis], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(proj.depths, depths_g[0], atol=1e-12, rtol=0)


def test_projection_closed_form_isotropic_on_axis():
    # an isotropic Gaussian of std s at depth z on the optical axis projects to std f s / z (plus eps2d)
    s, z, f = 0.1, 3.0, 50.0
    means = torch.tensor([[0.0, 0.0, z]], dtype=torch.float64)
    quats = torch.tensor([[1.0, 0, 0, 0]], dtype=torch.float64)
    scales = torch.full((1, 3), s, dtype=torch.float64)
    K = torch.tensor([[f, 0, 32.0], [0, f, 24.0], [0, 0, 1]], dtype=torch.float64)
    proj = project_gaussians(means, quats, scales, torch.eye(4, dtype=torch.float64), K, 64, 48)
    var = (f * s / z) ** 2 + 0.3
    torch.testing.assert_close(proj.means2d, torch.tensor([[32.0, 24.0]], dtype=torch.float64))
    torch.testing.assert_close(proj.conics, torch.tensor([[1 / var, 0.0, 1 / var]], dtype=torch.float64))
    assert int(proj.radii[0]) == math.ceil(3 * math.sqrt(var))


def test_quaternion_rotation_closed_form():
    # 90 degrees about z: x -> y
    q = torch.tensor([[math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)]], dtype=torch.float64)
    R = quat_to_rotmat(q)[0]
    torch.testing.assert_close(R @ torch.tensor([1.0, 0, 0], dtype=torch.float64),
                               torch.tensor([0.0, 1.0, 0], dtype=torch.float64), atol=1e-12, rtol=0)  # fmt: skip


def test_sh_matches_gsplat_and_closed_forms():
    torch_impl = pytest.importorskip("gsplat.cuda._torch_impl")
    g = torch.Generator().manual_seed(0)
    dirs = torch.randn(100, 3, generator=g, dtype=torch.float64)
    coeffs = torch.randn(100, 16, 3, generator=g, dtype=torch.float64)
    for deg in range(4):
        ours = eval_sh(coeffs, dirs, deg)
        theirs = torch_impl._spherical_harmonics(deg, dirs, coeffs)
        torch.testing.assert_close(ours, theirs, atol=1e-10, rtol=0)
    # explicit formulas: Y00 = 1 / (2 sqrt(pi)), Y1 = sqrt(3 / (4 pi)) * (-y, z, -x)
    d = torch.nn.functional.normalize(dirs, dim=-1)
    b = sh_basis(d, 1)
    assert abs(C0 - 0.5 / math.sqrt(math.pi)) < 1e-15 and abs(C1 - math.sqrt(3 / (4 * math.pi))) < 1e-15
    torch.testing.assert_close(b[:, 1:], C1 * torch.stack([-d[:, 1], d[:, 2], -d[:, 0]], -1))
    # degree-2 basis functions are orthonormal on the sphere (Monte Carlo with many samples)
    u = torch.nn.functional.normalize(torch.randn(400_000, 3, generator=g, dtype=torch.float64), dim=-1)
    B = sh_basis(u, 3)
    gram = 4 * math.pi * (B.T @ B) / len(u)
    torch.testing.assert_close(gram, torch.eye(16, dtype=torch.float64), atol=2.5e-2, rtol=0)


def test_sh_degree_mask_equals_zeroed_coefficients():
    means, quats, scales, opac, sh = random_scene(30, 4, sh_degree=3)
    viewmat, K = tiny_camera(16, 16)
    degs = torch.randint(0, 4, (30,), generator=torch.Generator().manual_seed(2))
    img, _ = rasterize(means, quats, scales, opac, sh, viewmat, K, 16, 16, sh_degrees=degs)
    zeroed = sh.clone()
    for k in range(16):
        zeroed[:, k] *= (int(math.isqrt(k)) <= degs).double()[:, None]
    img2, _ = rasterize(means, quats, scales, opac, zeroed, viewmat, K, 16, 16)
    torch.testing.assert_close(img, img2, atol=1e-12, rtol=0)
    img3, _ = rasterize(means, quats, scales, opac, sh, viewmat, K, 16, 16)
    assert (img3 - img).abs().max() > 1e-3


def test_binning_matches_enumeration():
    means, quats, scales, _, _ = random_scene(60, 9)
    w, h = 37, 29
    viewmat, K = tiny_camera(w, h)
    proj = project_gaussians(means, quats, scales, viewmat, K, w, h)
    bins = bin_gaussians(proj.means2d, proj.radii, proj.depths, w, h, 8)
    for t in range(bins.n_tiles):
        tx, ty = t % bins.n_tiles_x, t // bins.n_tiles_x
        ids = bins.gauss_ids[bins.offsets[t] : bins.offsets[t + 1]]
        expect = []
        for i in torch.argsort(proj.depths).tolist():
            r = int(proj.radii[i])
            if r == 0:
                continue
            u, v = proj.means2d[i].tolist()
            # the tile's pixel-centre range intersects [u - r, u + r] x [v - r, v + r] (or touches it)
            if u + r >= tx * 8 and u - r <= (tx + 1) * 8 and v + r >= ty * 8 and v - r <= (ty + 1) * 8:
                expect.append(i)
        got = ids.tolist()
        assert set(got) <= set(expect) and all(np.diff(proj.depths[ids].numpy()) >= 0)
        # every Gaussian that covers a pixel centre of this tile is listed
        for i in expect:
            u, v = proj.means2d[i].tolist()
            r = int(proj.radii[i])
            xs = [x + 0.5 for x in range(tx * 8, min((tx + 1) * 8, w))]
            ys = [y + 0.5 for y in range(ty * 8, min((ty + 1) * 8, h))]
            if any(abs(x - u) <= r for x in xs) and any(abs(y - v) <= r for y in ys):
                assert i in got


def test_bad_inputs_raise_clear_errors():
    means, quats, scales, opac, colors = random_scene(5, 0)
    viewmat, K = tiny_camera()
    with pytest.raises(ValueError, match="opacities"):
        rasterize(means, quats, scales, opac[:, None], colors, viewmat, K, 16, 16)
    with pytest.raises(ValueError, match="colors"):
        rasterize(means, quats, scales, opac, colors[:, :, None, None], viewmat, K, 16, 16)
    with pytest.raises(ValueError, match="width and height"):
        rasterize(means, quats, scales, opac, colors, viewmat, K, 0, 16)
    with pytest.raises(ValueError, match="sh_degree"):
        rasterize(means, quats, scales, opac, colors, viewmat, K, 16, 16, sh_degree=1)
    with pytest.raises(TypeError):
        rasterize(means.numpy(), quats, scales, opac, colors, viewmat, K, 16, 16)
