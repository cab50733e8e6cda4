"""Metrics against independent implementations; loaders round-trip; the synthetic scene is geometrically right."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from iclr25.locogs import GaussianSet
from iclr25.locogs.camera import look_at
from iclr25.locogs.data import llff_split
from iclr25.locogs.data.blender import load_blender_scene, save_blender_scene
from iclr25.locogs.data.colmap import load_colmap_scene, rotmat_to_qvec, save_colmap_scene
from iclr25.locogs.data.ply import load_point_cloud, read_3dgs_ply, save_point_cloud, write_3dgs_ply
from iclr25.locogs.data.synthetic import make_synthetic_scene
from iclr25.locogs.metrics import LPIPS, psnr, ssim, ssim_map
from iclr25.locogs.projection import quat_to_rotmat


@pytest.fixture(scope="module")
def small_scene():
    return make_synthetic_scene(n_views=9, width=20, height=16, n_points=300, supersample=1)


def test_psnr_closed_form():
    a = torch.zeros(8, 8, 3)
    b = torch.full((8, 8, 3), 0.1)
    assert abs(psnr(a, b) - 20.0) < 1e-5
    assert psnr(a, a) == float("inf")


def test_ssim_equals_skimage_on_interior():
    metrics = pytest.importorskip("skimage.metrics")
    g = torch.Generator().manual_seed(0)
    a = torch.rand(40, 36, 3, generator=g, dtype=torch.float64)
    b = (a + 0.1 * torch.randn(40, 36, 3, generator=g, dtype=torch.float64)).clamp(0, 1)
    _, full = metrics.structural_similarity(a.numpy(), b.numpy(), gaussian_weights=True, sigma=1.5,
                                            use_sample_covariance=False, data_range=1.0, channel_axis=2,
                                            full=True)  # fmt: skip
    ours = ssim_map(a, b)[0].permute(1, 2, 0).numpy()
    np.testing.assert_allclose(ours[5:-5, 5:-5], full[5:-5, 5:-5], atol=1e-12)
    valid = ssim_map(a, b, padding="valid")[0].permute(1, 2, 0).numpy()
    np.testing.assert_allclose(valid, full[5:-5, 5:-5], atol=1e-12)
    assert float(ssim(a, a)) == pytest.approx(1.0)


def test_lpips_structure_with_random_weights(tmp_path):
    torch.manual_seed(0)
    model = LPIPS()
    for p in model.parameters():
        p.data.uniform_(0, 0.1) if p.dim() == 4 and p.shape[0] == 1 else None
    state = {k: v for k, v in model.state_dict().items() if k.startswith("features.")}
    state.update({f"lin{i}.model.1.weight": model.lins[i].weight.detach().abs() for i in range(5)})
    path = tmp_path / "lpips_vgg.pth"
    torch.save(state, path)
    m2 = LPIPS().load_weights(path)
    a, b = torch.rand(1, 3, 32, 32), torch.rand(1, 3, 32, 32)
    d_ab, d_ba, d_aa = float(m2(a, b)), float(m2(b, a)), float(m2(a, a))
    assert d_aa == pytest.approx(0.0, abs=1e-9) and d_ab > 0 and d_ab == pytest.approx(d_ba, rel=1e-5)
    torch.save({k: v for k, v in state.items() if not k.startswith("lin")}, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match="lack"):
        LPIPS().load_weights(tmp_path / "bad.pth")
    with pytest.raises(FileNotFoundError, match="downloaded"):
        LPIPS().load_weights(tmp_path / "missing.pth")


def test_qvec_round_trip():
    R = look_at((1.0, -2.0, 0.5))[:3, :3].double()
    q = rotmat_to_qvec(R.numpy())
    torch.testing.assert_close(quat_to_rotmat(torch.tensor(q)[None])[0], R, atol=1e-6, rtol=0)


@pytest.mark.parametrize("binary", [False, True])
def test_colmap_round_trip(small_scene, tmp_path, binary):
    save_colmap_scene(small_scene, tmp_path, binary=binary)
    assert (tmp_path / "sparse" / "0" / ("cameras.bin" if binary else "cameras.txt")).exists()
    back = load_colmap_scene(tmp_path)
    assert len(back.cameras) == 9 and back.test_idx == [0, 8]
    for c0, c1, i0, i1 in zip(small_scene.cameras, back.cameras, small_scene.images, back.images):
        torch.testing.assert_close(c1.viewmat, c0.viewmat, atol=1e-5, rtol=0)
        torch.testing.assert_close(c1.K, c0.K)
        assert (i1 - i0).abs().max() <= 0.5 / 255 + 1e-6  # 8-bit PNG
    np.testing.assert_allclose(back.points, small_scene.points, atol=1e-6)


def test_blender_round_trip(small_scene, tmp_path):
    save_blender_scene(small_scene, tmp_path)
    meta = json.loads((tmp_path / "transforms_train.json").read_text())
    assert len(meta["frames"]) == len(small_scene.train_idx)
    save_point_cloud(tmp_path / "points3d.ply", small_scene.points, small_scene.colors)
    back = load_blender_scene(tmp_path, points_path=tmp_path / "points3d.ply")
    order = small_scene.train_idx + small_scene.test_idx
    for j, i in enumerate(order):
        torch.testing.assert_close(back.cameras[j].viewmat, small_scene.cameras[i].viewmat, atol=1e-5, rtol=0)
    np.testing.assert_allclose(back.points, small_scene.points, atol=1e-6)
    assert back.test_idx == list(range(len(small_scene.train_idx), 9))


def test_3dgs_ply_round_trip(tmp_path):
    g = torch.Generator().manual_seed(0)
    n = 50
    q = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1)
    gs = GaussianSet(torch.randn(n, 3, generator=g), q, torch.rand(n, 3, generator=g) + 0.01,
                     torch.rand(n, generator=g) * 0.98 + 0.01, torch.randn(n, 16, 3, generator=g))  # fmt: skip
    write_3dgs_ply(tmp_path / "pc.ply", gs)
    header = (tmp_path / "pc.ply").read_bytes()[:2000].decode("latin1")
    assert "property float f_rest_44" in header and "property float rot_3" in header
    assert (tmp_path / "pc.ply").stat().st_size > 62 * 4 * n
    back = read_3dgs_ply(tmp_path / "pc.ply")
    for name in ("means", "quats", "scales", "opacities", "sh"):
        torch.testing.assert_close(getattr(back, name), getattr(gs, name), atol=1e-5, rtol=1e-5)
    (tmp_path / "trunc.ply").write_bytes((tmp_path / "pc.ply").read_bytes()[:-10])
    with pytest.raises(ValueError, match="truncated"):
        read_3dgs_ply(tmp_path / "trunc.ply")


def test_point_cloud_formats(tmp_path):
    pts = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    np.save(tmp_path / "p.npy", np.concatenate([pts, np.full_like(pts, 0.25)], 1))
    p, c = load_point_cloud(tmp_path / "p.npy")
    np.testing.assert_array_equal(p, pts)
    assert np.allclose(c, 0.25)
    (tmp_path / "a.ply").write_text("ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
                                    "property float z\nend_header\n1 2 3\n4 5 6\n")  # fmt: skip
    p, c = load_point_cloud(tmp_path / "a.ply")
    np.testing.assert_array_equal(p, [[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError):
        load_point_cloud(tmp_path / "p.txt")


def test_llff_split():
    train, test = llff_split(17)
    assert test == [0, 8, 16] and len(train) == 14


def test_synthetic_scene_geometry(small_scene):
    # the surface points project inside the images and the rendered views are not empty
    cam = small_scene.cameras[1]
    pc = torch.tensor(small_scene.points) @ cam.R.T + cam.t
    uv = pc[:, :2] / pc[:, 2:] * torch.stack([cam.K[0, 0], cam.K[1, 1]]) + cam.K[:2, 2]
    inside = (uv[:, 0] >= 0) & (uv[:, 0] < cam.width) & (uv[:, 1] >= 0) & (uv[:, 1] < cam.height) & (pc[:, 2] > 0)
    assert inside.float().mean() > 0.5
    img = small_scene.images[1]
    assert img.std() > 0.05 and img.max() <= 1 and img.min() >= 0
    # a ray from the camera centre through the sphere centre hits the sphere near its front surface
    assert math.isfinite(small_scene.extent) and small_scene.extent > 1
