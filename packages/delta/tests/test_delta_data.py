"""Renderer invariants, TAP-Vid-3D / Kubric writers and loaders, geometry and depth providers."""

import numpy as np
import pytest
import torch

from iclr25.delta import render_synthetic_clip
from iclr25.delta.data.kubric import load_kubric_dense, write_kubric_dense
from iclr25.delta.data.tapvid3d import load_tapvid3d_npz, write_tapvid3d_npz
from iclr25.delta.depth import DepthProvider, GroundTruthDepth, TransformersDepth
from iclr25.delta.geometry import align_disparity_lstsq, default_intrinsics, disparity_to_depth, uvd_to_xyz, xyz_to_uvd

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def clip():
    return render_synthetic_clip(seed=3, num_frames=6, height=32, width=40, num_objects=3)


def test_frame0_tracks_are_the_pixel_grid_and_depth(clip):
    h, w = clip.depth.shape[1:]
    yy, xx = np.mgrid[0:h, 0:w]
    assert np.abs(clip.tracks_uv[0] - np.stack([xx, yy], -1)).max() < 1e-9
    assert np.abs(clip.tracks_xyz[0, ..., 2] - clip.depth[0]).max() < 1e-5 * clip.depth.max()
    assert clip.visibility[0].all()
    assert clip.video.dtype == np.uint8 and clip.video.shape == (6, 3, h, w)


def test_rigid_distances_constant_and_projection(clip):
    for obj in np.unique(clip.object_id):
        iy, ix = np.nonzero(clip.object_id == obj)
        sel = np.random.default_rng(0).choice(len(iy), size=min(20, len(iy)), replace=False)
        pts = clip.tracks_xyz[:, iy[sel], ix[sel]]  # T x n x 3
        d = np.linalg.norm(pts[:, :, None] - pts[:, None], axis=-1)
        assert np.abs(d - d[:1]).max() < 1e-9
    uv, z = xyz_to_uvd(clip.tracks_xyz, clip.K)
    assert np.abs(uv - clip.tracks_uv).max() < 1e-9
    assert np.abs(z - clip.tracks_xyz[..., 2]).max() == 0


def test_visible_tracks_agree_with_rendered_depth_and_motion_exists(clip):
    t = clip.num_frames - 1
    vis = clip.visibility[t]
    uv = np.round(clip.tracks_uv[t][vis]).astype(int)
    rendered = clip.depth[t][uv[:, 1], uv[:, 0]]
    rel = np.abs(rendered - clip.tracks_xyz[t][vis][:, 2]) / rendered
    assert np.median(rel) < 0.01
    assert 0.3 < vis.mean() < 1.0  # something leaves the frame or gets occluded
    assert np.abs(clip.flow(t)).mean() > 0.5


def test_renderer_is_deterministic():
    a = render_synthetic_clip(seed=7, num_frames=2, height=16, width=16)
    b = render_synthetic_clip(seed=7, num_frames=2, height=16, width=16)
    assert np.array_equal(a.video, b.video) and np.array_equal(a.tracks_xyz, b.tracks_xyz)
    with pytest.raises(ValueError):
        render_synthetic_clip(num_frames=0)


def test_tapvid3d_roundtrip(tmp_path, clip):
    path = tmp_path / "clip.npz"
    write_tapvid3d_npz(path, clip, num_tracks=50, seed=1, query_mode="random")
    s = load_tapvid3d_npz(str(path))
    assert s.video.shape == clip.video.shape and s.tracks_xyz.shape == (6, 50, 3)
    assert np.abs(s.video.astype(float) - clip.video).mean() < 8  # JPEG
    q = s.queries_xyt
    t = q[:, 2].astype(int)
    assert s.visibility[t, np.arange(50)].all()  # queries sit on visible frames
    uv, _ = xyz_to_uvd(
        s.tracks_xyz[t, np.arange(50)],
        np.array([[s.intrinsics[0], 0, s.intrinsics[2]], [0, s.intrinsics[1], s.intrinsics[3]], [0, 0, 1]]),
    )
    assert np.abs(uv - q[:, :2]).max() < 1e-3
    assert np.allclose(s.depth, clip.depth)
    bad = tmp_path / "bad.npz"
    np.savez(bad, queries_xyt=q)
    with pytest.raises(ValueError, match="missing"):
        load_tapvid3d_npz(str(bad))


def test_kubric_dense_roundtrip(tmp_path, clip):
    write_kubric_dense(tmp_path, "seq0", clip)
    s = load_kubric_dense(tmp_path, "seq0")
    assert np.array_equal(s.video, clip.video)
    span = clip.depth.max() - clip.depth.min()
    assert np.abs(s.depth - clip.depth).max() <= span / 65535 + 1e-5
    assert np.array_equal(s.visibility, clip.visibility)
    assert np.allclose(s.coords, clip.tracks_uv, atol=1e-4)
    with pytest.raises(ValueError):
        load_kubric_dense(tmp_path, "missing")


def test_geometry_roundtrip_and_default_intrinsics():
    K = default_intrinsics(48, 64)
    assert K[0, 0] == 64 and K[0, 2] == 32 and K[1, 2] == 24
    rng = np.random.default_rng(0)
    uv = rng.uniform(0, 60, (10, 2))
    d = rng.uniform(1, 5, 10)
    xyz = uvd_to_xyz(uv, d, K)
    uv2, d2 = xyz_to_uvd(xyz, K)
    assert np.allclose(uv, uv2) and np.allclose(d, d2)


def test_disparity_alignment_recovers_scale_and_shift():
    rng = np.random.default_rng(0)
    depth = rng.uniform(1.0, 10.0, (20, 30))
    rel = (1.0 / depth - 0.05) / 0.3  # relative disparity with unknown scale 0.3 and shift 0.05
    s, t = align_disparity_lstsq(rel, depth)
    assert s == pytest.approx(0.3, rel=1e-9) and t == pytest.approx(0.05, abs=1e-9)
    assert np.allclose(disparity_to_depth(rel, s, t), depth)
    with pytest.raises(ValueError):
        align_disparity_lstsq(rel, depth[:5])


def test_depth_providers(clip):
    gt = GroundTruthDepth(clip.depth)
    assert isinstance(gt, DepthProvider)
    assert torch.equal(gt(clip.video), torch.as_tensor(clip.depth))
    transformers = pytest.importorskip("transformers")
    cfg = transformers.DPTConfig(
        hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=37, image_size=32,
        patch_size=8, neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=16, backbone_out_indices=[0, 1, 2, 3],
        reassemble_factors=[4, 2, 1, 0.5], head_in_index=-1,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.DPTForDepthEstimation(cfg)
    provider = TransformersDepth(model, output="disparity", input_size=32)
    out = provider(clip.video[:2], reference_depth=clip.depth[0])
    assert out.shape == (2, 32, 40) and torch.isfinite(out).all() and (out > 0).all()
    rel = provider(clip.video[:2])
    assert torch.median(rel).item() == pytest.approx(1.0, rel=1e-3)


def test_time_reversed_clip_plays_the_scene_backwards():
    fwd = render_synthetic_clip(seed=4, num_frames=5, height=16, width=16)
    rev = render_synthetic_clip(seed=4, num_frames=5, height=16, width=16, time_reversed=True)
    # equal up to float rounding of the composed rotations (a texel on a checker edge may flip)
    assert (rev.video != fwd.video[::-1]).mean() < 0.01
    assert np.allclose(rev.depth, fwd.depth[::-1], rtol=1e-6)
    yy, xx = np.mgrid[0:16, 0:16]
    assert np.abs(rev.tracks_uv[0] - np.stack([xx, yy], -1)).max() < 1e-9  # tracks start on the last instant's grid
