"""Part 2: tcnn-exact hash grid (torch and Triton), the LocoGS model's gradient paths, and the codec."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from iclr25.locogs import FieldConfig, HashGridEncoding, LocoGS, LocoGSConfig, compress, decompress, rasterize, render
from iclr25.locogs.codec import decode_positions, dequantize, encode_positions, morton_codes, quantize_uniform
from iclr25.locogs.codec.container import quantize_in_memory
from iclr25.locogs.config import clip_width, locogs_preset
from iclr25.locogs.field import contract_unisphere
from iclr25.locogs.hashgrid import GridLayout
from iclr25.locogs.kernels.reference import hashgrid_reference
from iclr25.locogs.oracles import random_scene, tiny_camera
from iclr25.locogs.train_locogs import field_lr, mask_losses
from iclr25.shared.testing import assert_close_ratio

PLS = 1.447269237440378


def test_tcnn_layout_counts():
    lay19 = GridLayout(16, 2, 19, 16, PLS)
    assert lay19.n_params == 12_599_920
    assert lay19.resolutions == [16, 24, 34, 49, 71, 102, 148, 213, 308, 446, 646, 934, 1352, 1956, 2831, 4096]
    assert [i for i, d in enumerate(lay19.dense_levels) if d] == [0, 1, 2, 3, 4]
    lay17 = GridLayout(16, 2, 17, 16, PLS)
    assert lay17.n_params == 3_495_488
    assert [i for i, d in enumerate(lay17.dense_levels) if d] == [0, 1, 2, 3]
    enc = HashGridEncoding(log2_hashmap_size=12)
    assert enc.n_params == enc.table.numel() and enc.n_output_dims == 32
    assert float(enc.table.detach().abs().max()) <= 1e-4


def test_dense_level_reproduces_linear_function():
    enc = HashGridEncoding(n_levels=2, features_per_level=1, log2_hashmap_size=14, base_resolution=8,
                           per_level_scale=1.5)  # fmt: skip
    lay = enc.layout
    assert all(lay.dense_levels)
    a = torch.tensor([0.3, -1.2, 2.0])
    with torch.no_grad():
        for r, off in zip(lay.resolutions, lay.offsets):
            zz, yy, xx = torch.meshgrid(torch.arange(r), torch.arange(r), torch.arange(r), indexing="ij")
            idx = (xx + yy * r + zz * r * r).reshape(-1)
            vals = a[0] * xx + a[1] * yy + a[2] * zz  # linear in the vertex coordinates
            enc.table[off + idx, 0] = vals.reshape(-1).float()
    p = torch.rand(200, 3) * 0.9  # stay inside the grid (corner + 1 < r)
    out = enc(p)
    for lvl, s in enumerate(lay.scales):
        pos = p * s + 0.5
        torch.testing.assert_close(out[:, lvl], pos @ a, atol=2e-4, rtol=1e-5)


def test_hash_of_known_corner():
    lay = GridLayout(16, 2, 12, 16, PLS)
    lvl = 10
    assert not lay.dense_levels[lvl]
    table = torch.zeros(lay.n_entries, 2)
    x, y, z = 37, 401, 222
    row = ((x * 1) ^ (y * 2654435761) ^ (z * 805459861)) % (1 << 32) % lay.sizes[lvl] + lay.offsets[lvl]
    table[row] = torch.tensor([1.0, 2.0])
    s = lay.scales[lvl]
    p = torch.tensor([[(x - 0.5) / s, (y - 0.5) / s, (z - 0.5) / s]], dtype=torch.float64).float()
    out = hashgrid_reference(p, table, lay)
    torch.testing.assert_close(out[0, 2 * lvl : 2 * lvl + 2], torch.tensor([1.0, 2.0]), atol=1e-3, rtol=0)


@pytest.mark.triton
@pytest.mark.parametrize("n,levels,log2t,feats", [(1, 3, 8, 2), (37, 6, 9, 2), (70, 5, 10, 2), (45, 4, 9, 1),
                                                  (33, 3, 9, 3), (0, 3, 8, 2)])  # fmt: skip
def test_hashgrid_triton_matches_reference(n, levels, log2t, feats):
    """F = 3 exercises the register accumulator padded to a power of two; n = 0 launches nothing."""
    enc = HashGridEncoding(n_levels=levels, features_per_level=feats, log2_hashmap_size=log2t, base_resolution=4,
                           per_level_scale=2.0)  # fmt: skip
    with torch.no_grad():
        enc.table.normal_()
    p = torch.rand(n, 3, generator=torch.Generator().manual_seed(n))
    p[:1] = 1.0
    up = torch.randn(n, levels * feats, generator=torch.Generator().manual_seed(1))
    outs = []
    for backend in ("torch", "triton"):
        enc.backend = backend
        enc.table.grad = None
        y = enc(p)
        y.backward(up)
        outs.append((y.detach(), enc.table.grad.clone()))
    assert_close_ratio(outs[0][0], outs[1][0], ratio=1e-5, atol=1e-6, name="encoding")
    assert_close_ratio(outs[0][1], outs[1][1], ratio=1e-5, atol=1e-6, name="table grad")


def test_contraction_and_schedules():
    x = torch.tensor([[0.5, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, -100.0, 0.0]])
    p = contract_unisphere(x)
    torch.testing.assert_close(p[0], torch.tensor([0.625, 0.5, 0.5]))
    assert abs(float(p[1, 0]) - ((2 - 1 / 3) / 4 + 0.5)) < 1e-6 and 0 <= float(p.min()) and float(p.max()) <= 1
    cfg = LocoGSConfig()
    for t, expect in ((0, 1e-4), (5000, 0.0068129), (30000, 1e-3)):
        assert math.isclose(field_lr(cfg, "grid", t), expect, rel_tol=1e-4)
    assert clip_width(8) == pytest.approx(4.4) and clip_width(6) == pytest.approx(4.0)
    assert locogs_preset("small").field.log2_hashmap_size == 17 and locogs_preset("small").lambda_mask == 0.005


def _model(n=300, seed=0, log2t=10):
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(n, 3)).astype(np.float32) * 0.4
    cfg = LocoGSConfig(field=FieldConfig(n_levels=6, log2_hashmap_size=log2t))
    m = LocoGS.from_points(pts, rng.uniform(size=(n, 3)), cfg, extent=2.0)
    with torch.no_grad():
        m.field.grid.table.normal_(0, 0.2)
        m.store["sh_mask"][::3, 1] = -10.0  # these Gaussians drop bands 2 and 3
        m.store["sh_mask"][::5, 0] = -10.0  # these drop every band above 0
        m.store["mask"][::7] = -10.0  # masked out
    return m


def test_gradient_paths_and_mask_losses():
    m = _model(60)
    g, aux = m.gaussians()
    viewmat, K = tiny_camera(16, 16, dtype=torch.float32)
    img, _ = rasterize(g.means, g.quats, g.scales, g.opacities, g.sh, viewmat, K, 16, 16)
    cfg = m.cfg
    loss = img.mean() + mask_losses(aux, cfg, cfg.sh_mask_start_iter + 1, 3)
    loss.backward()
    assert m.store["means"].grad is not None and m.store["means"].grad.abs().sum() > 0
    assert m.field.grid.table.grad.abs().sum() > 0
    assert m.store["mask"].grad.abs().sum() > 0 and m.store["sh_mask"].grad.abs().sum() > 0
    # the field sees detached positions: the positions' gradient is the renderer's only
    m2 = _model(60)
    g2, _ = m2.gaussians()
    g2.opacities.sum().backward()
    assert m2.store["means"].grad is None or m2.store["means"].grad.abs().sum() == 0
    # fp16 straight-through: forward is rounded, backward is identity
    assert torch.equal(g.means, m.store["means"].half().float())


def test_codec_round_trip_and_render_equivalence(tmp_path):
    m = _model()
    path = tmp_path / "scene.locogs"
    report = compress(m, path)
    assert report.total_bytes == os.path.getsize(path)
    assert set(report.sections) == {"positions", "color", "scale", "sh_mask", "grid", "mlp"}
    dec = decompress(path)
    n_kept = int((torch.sigmoid(m.store["mask"]) > 0.01).sum())
    assert len(dec) == n_kept
    assert sorted(torch.bincount(dec.sh_degrees, minlength=4).tolist()) != [0, 0, 0, n_kept]  # degrees vary
    ref = quantize_in_memory(m).export_gaussians()
    for seed in range(2):
        viewmat, K = tiny_camera(20, 18, dtype=torch.float32, dist=3.0 + seed)
        a, _ = rasterize(dec.means, dec.quats, dec.scales, dec.opacities, dec.sh, viewmat, K, 20, 18,
                         sh_degrees=dec.sh_degrees)  # fmt: skip
        b, _ = rasterize(ref.means, ref.quats, ref.scales, ref.opacities, ref.sh, viewmat, K, 20, 18,
                         sh_degrees=ref.sh_degrees)  # fmt: skip
        assert a.abs().max() > 0.05
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    # positions are exactly the fp16 positions of the kept Gaussians (as a set)
    kept = m.store["means"].detach()[torch.sigmoid(m.store["mask"]) > 0.01].half().float()
    assert torch.equal(torch.sort(dec.means[:, 0]).values, torch.sort(kept[:, 0]).values)


def test_size_grows_by_few_bytes_per_gaussian(tmp_path):
    small, big = _model(400, 1), _model(1600, 1)
    big.field.load_state_dict(small.field.state_dict())
    r1 = compress(small, tmp_path / "a.locogs")
    r2 = compress(big, tmp_path / "b.locogs")
    n1, n2 = r1.n_gaussians, r2.n_gaussians
    per = (r2.total_bytes - r1.total_bytes) / (n2 - n1)
    assert per < 16, f"{per:.1f} bytes per added Gaussian (an explicit 3DGS store needs >= 59)"


def test_corrupted_or_truncated_file_raises(tmp_path):
    path = tmp_path / "scene.locogs"
    compress(_model(100), path)
    data = path.read_bytes()
    for name, bad in (("truncated", data[:-5]), ("flipped", data[:-40] + bytes([data[-40] ^ 1]) + data[-39:]),
                      ("header", data[:20] + bytes([data[20] ^ 0xFF]) + data[21:]), ("magic", b"X" + data[1:]),
                      ("empty", b"")):  # fmt: skip
        (tmp_path / name).write_bytes(bad)
        with pytest.raises(ValueError):
            decompress(tmp_path / name)


def test_positions_round_trip_bit_exact():
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(500, 3)) * 3).astype(np.float16)
    x = np.concatenate([x, x[:20], -x[:10], np.zeros((3, 3), np.float16), -np.zeros((2, 3), np.float16)])
    y = decode_positions(encode_positions(x))
    assert np.array_equal(y.view(np.uint16), x.view(np.uint16))
    assert len(encode_positions(x[np.argsort(morton_codes(x.astype(np.float32)))])) < 6 * len(x)
    with pytest.raises(ValueError):
        decode_positions(encode_positions(x)[:-3])


def test_morton_codes_interleave_bits():
    xyz = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=np.float64)
    codes = morton_codes(xyz, bits=1)
    assert codes.tolist() == [0, 1, 2, 4, 7]


def test_quantizer_error_bound_and_log_inverse():
    rng = np.random.default_rng(0)
    x = rng.normal(size=5000)
    for bits in (6, 8):
        q, p = quantize_uniform(x, bits)
        d = clip_width(bits)
        clipped = np.clip(x, x.mean() - d * x.std(), x.mean() + d * x.std())
        assert np.abs(dequantize(q, p) - clipped).max() <= (p.hi - p.lo) / (2 * (2**bits - 1)) + 1e-12
    q, p = quantize_uniform(x, 16, log=True, clip=False)
    assert np.abs(dequantize(q, p) - x).max() < 1e-3


def test_render_with_sh_degrees_equals_zeroed_coefficients():
    means, quats, scales, opac, sh = random_scene(20, 3, dtype=torch.float32, sh_degree=3)
    viewmat, K = tiny_camera(16, 16, dtype=torch.float32)
    from iclr25.locogs import GaussianSet
    from iclr25.locogs.camera import Camera

    degs = torch.tensor([0, 1, 2, 3] * 5)
    gs = GaussianSet(means, quats, scales, opac, sh, degs)
    cam = Camera(viewmat, K, 16, 16)
    zeroed = sh.clone()
    for k in range(16):
        zeroed[:, k] *= (math.isqrt(k) <= degs).float()[:, None]
    a = render(gs, cam).image
    b = render(GaussianSet(means, quats, scales, opac, zeroed), cam).image
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
