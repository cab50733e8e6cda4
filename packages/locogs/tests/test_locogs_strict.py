"""Strict inputs (rasterize, hash grid, compress), the fair compressed schedules, adaptive SH that reads only the
active bands, and the whole-tile footprint option checked against gsplat's own tile binning."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr25.locogs import FieldConfig, HashGridEncoding, LocoGS, LocoGSConfig, RasterConfig, compress, rasterize
from iclr25.locogs.config import Train3DGSConfig, reset_recovery_steps
from iclr25.locogs.kernels import rasterize_pixels
from iclr25.locogs.oracles import random_scene, tiny_camera
from iclr25.locogs.projection import project_gaussians
from iclr25.locogs.sh import eval_sh, sh_basis

# ---------------------------------------------------------------------------------------------------------------
# rasterize: every input checked up front


def _good(n=6):
    means, quats, scales, opac, colors = random_scene(n, 0, dtype=torch.float32)
    viewmat, K = tiny_camera(16, 16, dtype=torch.float32)
    return dict(means=means, quats=quats, scales=scales, opacities=opac, colors=colors, viewmat=viewmat, K=K,
                width=16, height=16)  # fmt: skip


def _set(d, key, fn):
    d = dict(d)
    d[key] = fn(d[key])
    return d


def _nan_at(t, idx=1):
    t = t.clone()
    t.view(-1)[idx] = float("nan")
    return t


BAD = [
    ("means [N,2]", lambda d: _set(d, "means", lambda t: t[:, :2]), ValueError, r"means must have shape \(6, 3\)"),
    ("quats N-1", lambda d: _set(d, "quats", lambda t: t[:-1]), ValueError, r"quats must have shape \(6, 4\)"),
    ("int means", lambda d: _set(d, "means", lambda t: t.long()), TypeError, "means must be a floating-point"),
    ("mixed dtype", lambda d: _set(d, "scales", lambda t: t.double()), TypeError, "scales is torch.float64"),
    ("viewmat 3x4", lambda d: _set(d, "viewmat", lambda t: t[:3]), ValueError, r"viewmat must have shape \(4, 4\)"),
    ("K 4x4", lambda d: _set(d, "K", lambda t: torch.eye(4)), ValueError, r"K must have shape \(3, 3\)"),
    (
        "viewmat scaled",
        lambda d: _set(d, "viewmat", lambda t: t * torch.tensor([2.0, 2, 2, 1])[:, None]),
        ValueError,
        "rotation",
    ),
    (
        "viewmat mirrored",
        lambda d: _set(d, "viewmat", lambda t: torch.diag(torch.tensor([1.0, 1, -1, 1])) @ t),
        ValueError,
        "det",
    ),
    (
        "viewmat last row",
        lambda d: _set(d, "viewmat", lambda t: torch.cat([t[:3], torch.ones(1, 4)])),
        ValueError,
        "last row",
    ),
    ("K fx < 0", lambda d: _set(d, "K", lambda t: t * torch.tensor([-1.0, 1, 1])[:, None]), ValueError, "fx, fy > 0"),
    ("K nan", lambda d: _set(d, "K", _nan_at), ValueError, "finite"),
    ("negative scale", lambda d: _set(d, "scales", lambda t: t * torch.tensor([1.0, -1, 1])), ValueError, "negative"),
    (
        "zero scale, visible",
        lambda d: _set(d, "scales", lambda t: t * torch.tensor([1.0, 0, 1])),
        ValueError,
        "zeros on a Gaussian with opacity > 0",
    ),
    ("opacity > 1", lambda d: _set(d, "opacities", lambda t: t + 1.0), ValueError, r"opacities outside \[0, 1\]"),
    ("opacity < 0", lambda d: _set(d, "opacities", lambda t: t - 1.0), ValueError, r"opacities outside \[0, 1\]"),
    ("zero quaternion", lambda d: _set(d, "quats", lambda t: t * 0), ValueError, "zero norm"),
    ("nan mean", lambda d: _set(d, "means", _nan_at), ValueError, "means has NaN/inf: 1 of 6"),
    (
        "inf colour",
        lambda d: _set(d, "colors", lambda t: t.index_fill(0, torch.tensor([2]), float("inf"))),
        ValueError,
        "colors has NaN/inf: 1 of 6",
    ),
    ("nan quat", lambda d: _set(d, "quats", _nan_at), ValueError, "quats has NaN/inf"),
    ("nan opacity", lambda d: _set(d, "opacities", _nan_at), ValueError, "opacities has NaN/inf"),
    ("nan scale", lambda d: _set(d, "scales", _nan_at), ValueError, "scales has NaN/inf"),
    ("width 0", lambda d: dict(d, width=0), ValueError, "positive"),
    ("width float", lambda d: dict(d, width=16.5), TypeError, "width must be an int"),
    ("height bool", lambda d: dict(d, height=True), TypeError, "height must be an int"),
    ("K on meta", lambda d: _set(d, "K", lambda t: t.to("meta")), ValueError, "K is on meta"),
    ("numpy means", lambda d: _set(d, "means", lambda t: t.numpy()), TypeError, "means must be a torch.Tensor"),
]


@pytest.mark.parametrize("mutate,exc,match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_rasterize_rejects_bad_inputs(mutate, exc, match):
    d = mutate(_good())
    with pytest.raises(exc, match=match):
        rasterize(**d)


def test_rasterize_rejects_bad_background_sh_and_cfg():
    d = _good()
    for bg, match in ((torch.zeros(2), r"one value per colour channel \(3,\)"),
                      (torch.tensor([0.0, float("nan"), 0.0]), "background must be finite"),
                      (torch.zeros(3, dtype=torch.complex64), "real numbers")):  # fmt: skip
        with pytest.raises((ValueError, TypeError), match=match):
            rasterize(**d, background=bg)
    sh = torch.zeros(6, 9, 3)
    with pytest.raises(ValueError, match=r"sh_degree must be in 0..2"):
        rasterize(**dict(d, colors=sh), sh_degree=3)
    with pytest.raises(ValueError, match=r"sh_degrees outside \[0, 2\]"):
        rasterize(**dict(d, colors=sh), sh_degrees=torch.tensor([0, 1, 2, 3, 0, 0]))
    with pytest.raises(TypeError, match="integer tensor"):
        rasterize(**dict(d, colors=sh), sh_degrees=torch.zeros(6))
    with pytest.raises(ValueError, match=r"K in \(1, 4, 9, 16\)"):
        rasterize(**dict(d, colors=torch.zeros(6, 5, 3)))
    with pytest.raises(TypeError, match="RasterConfig"):
        rasterize(**d, cfg={"footprint": "tile"})
    with pytest.raises(ValueError, match="'square' or 'tile'"):
        RasterConfig(footprint="disc")


def test_rasterize_accepts_the_valid_edge_cases():
    """Unnormalised quaternions, opacities exactly 0 and 1, and a masked (opacity 0, scale 0) Gaussian are valid:
    the masked Gaussian changes nothing."""
    d = _good()
    d["quats"] = d["quats"] * 7.0
    d["opacities"] = d["opacities"].clone()
    d["opacities"][1] = 1.0
    img, _ = rasterize(**d)
    d2 = {k: (torch.cat([v, v[:1]]) if k in ("means", "quats", "scales", "opacities", "colors") else v)
          for k, v in d.items()}  # fmt: skip
    d2["opacities"][-1] = 0.0
    d2["scales"][-1] = 0.0
    img2, _ = rasterize(**d2)
    assert torch.isfinite(img2).all()
    torch.testing.assert_close(img, img2, atol=0, rtol=0)


# ---------------------------------------------------------------------------------------------------------------
# hash grid: points must lie in [0, 1]^3


@pytest.mark.parametrize("bad,match", [(1.0 + 1e-4, "outside"), (-1e-6, "outside"), (float("nan"), "NaN"),
                                       (float("inf"), "NaN")])  # fmt: skip
def test_hashgrid_rejects_points_outside_unit_cube(bad, match):
    enc = HashGridEncoding(n_levels=3, log2_hashmap_size=8)
    p = torch.rand(10, 3, generator=torch.Generator().manual_seed(0))
    p[4, 1] = bad
    with pytest.raises(ValueError, match=match):
        enc(p)
    with pytest.raises(TypeError, match="floating point"):
        enc(torch.zeros(4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        enc(torch.zeros(4, 2))


def test_hashgrid_accepts_the_closed_cube():
    enc = HashGridEncoding(n_levels=3, log2_hashmap_size=8)
    corners = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.5]])
    assert torch.isfinite(enc(corners)).all() and enc(torch.zeros(0, 3)).shape == (0, 3 * 2)


# ---------------------------------------------------------------------------------------------------------------
# compress: refuse what cannot be stored faithfully


def _model(n=40, scale=0.4, offset=0.0):
    rng = np.random.default_rng(0)
    pts = (rng.normal(size=(n, 3)) * scale + offset).astype(np.float32)
    cfg = LocoGSConfig(field=FieldConfig(n_levels=4, log2_hashmap_size=8))
    return LocoGS.from_points(pts, rng.uniform(size=(n, 3)), cfg, extent=2.0)


def test_compress_refuses_a_fully_masked_model(tmp_path):
    m = _model()
    with torch.no_grad():
        m.store["mask"].fill_(-10.0)
    with pytest.raises(ValueError, match="every one of the 40 Gaussians is masked out"):
        compress(m, tmp_path / "x.locogs")
    assert not (tmp_path / "x.locogs").exists()


def test_compress_refuses_positions_beyond_fp16(tmp_path):
    m = _model()
    with torch.no_grad():
        m.store["means"][3, 0] = 7.0e4  # fp16 max is 65504: would decode as inf
    with pytest.raises(ValueError, match="beyond the fp16 range"):
        compress(m, tmp_path / "x.locogs")
    with torch.no_grad():
        m.store["means"][3, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        compress(m, tmp_path / "x.locogs")


def test_compress_warns_when_fp16_is_coarse_for_the_scene(tmp_path):
    pytest.importorskip("constriction")
    # a scene of extent ~1 centred at 2000: the fp16 step there is 1 or 2, far coarser than the scene
    with pytest.warns(UserWarning, match="fp16 step"):
        compress(_model(scale=0.2, offset=2000.0), tmp_path / "far.locogs")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a centred scene of the same size: no warning
        compress(_model(scale=0.2), tmp_path / "near.locogs")


# ---------------------------------------------------------------------------------------------------------------
# compressed schedules that stay fair


def test_scaled_3dgs_schedule_keeps_opacity_reset_recovery():
    full = Train3DGSConfig()
    rec = reset_recovery_steps(full)
    lift = -math.log(0.01 / 0.99)  # logit(0.5) - logit(0.01)
    assert rec == math.ceil(lift / 0.05) == 92
    for it in (150, 300, 1000):
        c = full.scaled(it)
        assert c.opacity_reset_interval >= rec  # a plain 3000 * it / 30000 would give 15 / 30 / 100
        assert c.densify_until_iter == round(15000 * it / 30000)
    assert full.scaled(150).opacity_reset_interval == 92
    assert full.scaled(30000).opacity_reset_interval == 3000  # the full schedule is untouched
    assert full.scaled(30000) == full


def test_scaled_locogs_schedule_scales_mask_learning_rates():
    full = LocoGSConfig()
    c = full.scaled(300)
    assert c.mask_lr == pytest.approx(0.01 * 100) and c.sh_mask_lr == pytest.approx(0.01 * 100)
    assert c.sh_mask_start_iter == 150 and c.densify_until_iter == 150
    # at full length the logits can move ~iterations * lr; the compressed schedule keeps that reach
    assert c.iterations * c.mask_lr == pytest.approx(full.iterations * full.mask_lr)
    assert full.scaled(30000).mask_lr == full.mask_lr
    with pytest.raises(ValueError, match="int >= 1"):
        full.scaled(0)


# ---------------------------------------------------------------------------------------------------------------
# adaptive SH: inactive bands are never read


def test_adaptive_sh_reads_only_active_bands():
    g = torch.Generator().manual_seed(0)
    n = 40
    coeffs = torch.randn(n, 16, 3, generator=g, dtype=torch.float64)
    dirs = torch.randn(n, 3, generator=g, dtype=torch.float64)
    degs = torch.arange(n) % 4
    poisoned = coeffs.clone()
    for i in range(n):
        poisoned[i, (int(degs[i]) + 1) ** 2 :] = float("nan")  # bands above the Gaussian's degree
    out = eval_sh(poisoned, dirs, 3, degs)
    assert torch.isfinite(out).all()  # evaluating all bands then masking would give NaN * 0 = NaN
    # independent transcription: each Gaussian with its own degree
    d = dirs / dirs.norm(dim=-1, keepdim=True)
    for i in range(n):
        k = (int(degs[i]) + 1) ** 2
        ref = (sh_basis(d[i : i + 1], int(degs[i]))[0, :, None] * coeffs[i, :k]).sum(0)
        torch.testing.assert_close(out[i], ref, atol=1e-12, rtol=0)


# ---------------------------------------------------------------------------------------------------------------
# whole-tile footprint (graphdeco / gsplat) against gsplat's tile binning


def _composite_tile_lists(means2d, conics, colors, opac, tile_lists, width, height, tile, cfg):
    """Per pixel: blend the depth-sorted Gaussians that gsplat lists for the pixel's tile (no square test)."""
    m, q, col, op = (t.detach().double().numpy() for t in (means2d, conics, colors, opac))
    img, alpha = np.zeros((height, width, col.shape[1])), np.zeros((height, width))
    ntx = -(-width // tile)
    for y in range(height):
        for x in range(width):
            T, c = 1.0, np.zeros(col.shape[1])
            for i in tile_lists[(y // tile) * ntx + x // tile]:
                dx, dy = m[i, 0] - (x + 0.5), m[i, 1] - (y + 0.5)
                sigma = 0.5 * (q[i, 0] * dx * dx + q[i, 2] * dy * dy) + q[i, 1] * dx * dy
                a = min(cfg.alpha_max, op[i] * math.exp(-sigma))
                if sigma < 0 or a < cfg.alpha_min:
                    continue
                if T * (1 - a) < cfg.t_min:
                    break
                c += a * T * col[i]
                T *= 1 - a
            img[y, x], alpha[y, x] = c, 1 - T
    return torch.from_numpy(img), torch.from_numpy(alpha)


def test_tile_footprint_matches_gsplat_tile_binning():
    gs = pytest.importorskip("gsplat.cuda._torch_impl")
    w, h, tile = 37, 21, 16
    means, quats, scales, opac, colors = random_scene(40, 5, dtype=torch.float64)
    viewmat, K = tiny_camera(w, h, dtype=torch.float64)
    cfg_tile = RasterConfig(footprint="tile")
    p = project_gaussians(means, quats, scales, viewmat, K, w, h, cfg_tile)
    ntx, nty = -(-w // tile), -(-h // tile)
    radii2 = p.radii[None, :, None].expand(1, -1, 2).double()
    _, isect_ids, flat = gs._isect_tiles(p.means2d[None].float(), radii2, p.depths[None].float(), tile, ntx, nty)
    tiles = (isect_ids >> 32).tolist()
    lists = {t: [] for t in range(ntx * nty)}
    for t, gid in zip(tiles, flat.tolist()):
        lists[t].append(gid)
    ref_img, ref_alpha = _composite_tile_lists(p.means2d, p.conics, colors, opac, lists, w, h, tile, cfg_tile)
    img, alpha = rasterize(means, quats, scales, opac, colors, viewmat, K, w, h, cfg=cfg_tile)
    assert ref_alpha.max() > 0.5
    torch.testing.assert_close(img, ref_img, atol=1e-10, rtol=0)
    torch.testing.assert_close(alpha, ref_alpha, atol=1e-10, rtol=0)
    square, _ = rasterize(means, quats, scales, opac, colors, viewmat, K, w, h)
    assert (square - img).abs().max() > 1e-4  # the option changes which pixels a Gaussian reaches


@pytest.mark.triton
def test_triton_tile_footprint_matches_reference():
    w, h = 37, 21
    means, quats, scales, opac, colors = random_scene(40, 5, dtype=torch.float32)
    viewmat, K = tiny_camera(w, h, dtype=torch.float32)
    cfg = RasterConfig(footprint="tile")
    out = {}
    for backend in ("torch", "triton"):
        leaves = [t.clone().requires_grad_(True) for t in (means, quats, scales, opac, colors)]
        img, alpha = rasterize(*leaves, viewmat, K, w, h, backend=backend, cfg=cfg)
        (img.square().sum() + alpha.sum()).backward()
        out[backend] = (img.detach(), [t.grad for t in leaves])
    torch.testing.assert_close(out["torch"][0], out["triton"][0], atol=2e-6, rtol=1e-5)
    square, _ = rasterize(means, quats, scales, opac, colors, viewmat, K, w, h, backend="torch")
    assert (square - out["torch"][0]).abs().max() > 1e-4  # the scene tells the two footprints apart
    for r, k in zip(out["torch"][1], out["triton"][1]):
        torch.testing.assert_close(r, k, atol=1e-5, rtol=1e-4)


@pytest.mark.triton
def test_triton_tile_loop_stops_once_the_tile_is_saturated():
    """32 opaque Gaussians cover the 16x16 tile first; everything behind them has NaN colours and opacities. A
    kernel that kept walking the tile's list would blend 0 * NaN = NaN; the early exit never loads them."""
    w = h = 16
    n_front, n_back = 32, 40
    n = n_front + n_back
    means2d = torch.full((n, 2), 8.0)
    conics = torch.tensor([[1e-5, 0.0, 1e-5]]).repeat(n, 1)  # flat: alpha ~ opacity on every pixel
    opac = torch.ones(n)
    colors = torch.rand(n, 3, generator=torch.Generator().manual_seed(0))
    depths = torch.cat([torch.linspace(1.0, 2.0, n_front), torch.linspace(3.0, 4.0, n_back)])
    radii = torch.full((n,), 20, dtype=torch.int32)
    finite = colors.clone()
    finite[n_front:] = 0.0
    poisoned = colors.clone()
    poisoned[n_front:] = float("nan")
    bg = torch.tensor([0.1, 0.2, 0.3])
    ref, ref_a = rasterize_pixels(means2d, conics, finite, opac, depths, radii, w, h, bg, backend="torch")
    leaves = [t.clone().requires_grad_(True) for t in (means2d, conics, poisoned)]
    img, alpha = rasterize_pixels(leaves[0], leaves[1], leaves[2], opac, depths, radii, w, h, bg, backend="triton")
    assert torch.isfinite(img).all()
    torch.testing.assert_close(img, ref, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(alpha, ref_a, atol=2e-6, rtol=1e-5)
    (img.sum() + alpha.sum()).backward()
    for t in leaves:
        assert torch.isfinite(t.grad).all()


def test_rasterizer_benchmark_calls_gsplat_with_matching_conventions():
    """The benchmark's gsplat backend (CUDA only, so exercised here with a stand-in for ``gsplat.rasterization``)
    passes the same scene, camera batch, near plane, eps2d and SH degree, and unbatches the result."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_locogs_rasterizer.py"
    spec = importlib.util.spec_from_file_location("bench_locogs_rasterizer_t", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    calls = []

    def fake_rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width, height, **kw):
        calls.append((means, viewmats, Ks, width, height, kw))
        img = (means.sum() * 0 + 1) * torch.ones(1, height, width, 3)
        return img, torch.ones(1, height, width, 1), {}

    leaves = [t.clone().requires_grad_(True) for t in bench.scene(50, "cpu")]
    viewmat, K = tiny_camera(16, 16, dtype=torch.float32)
    fwd, fwd_bwd = bench.make_fns("gsplat", leaves, viewmat, K, 16, fake_rasterization)
    img, alpha = fwd()
    fwd_bwd()
    assert len(calls) == 2 and img.shape == (16, 16, 3) and alpha.shape == (16, 16)
    means, viewmats, Ks, w, h, kw = calls[0]
    assert means is leaves[0] and viewmats.shape == (1, 4, 4) and torch.equal(viewmats[0], viewmat)
    assert Ks.shape == (1, 3, 3) and (w, h) == (16, 16)
    assert kw["near_plane"] == 0.2 and kw["eps2d"] == 0.3 and kw["sh_degree"] == 3
    fn, why = bench.gsplat_status("cpu")
    assert fn is None and "CUDA" in why
