"""Public tracker API: shapes, input validation, backward tracking, checkpoints (ours and the official layout)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr25.delta import DeltaConfig, DeltaModel, DeltaTracker, render_synthetic_clip
from iclr25.delta.checkpoint import load_checkpoint, save_checkpoint

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def clip():
    return render_synthetic_clip(seed=1, num_frames=5, height=32, width=48)


@pytest.fixture(scope="module")
def tracker():
    torch.manual_seed(0)
    return DeltaTracker(DeltaConfig.micro())


def test_dense_track_shapes_and_xyz(tracker, clip):
    res = tracker.track(clip.video, clip.depth, intrinsics=clip.K)
    assert res.uv.shape == (5, 32, 48, 2) and res.depth.shape == (5, 32, 48) and res.xyz.shape == (5, 32, 48, 3)
    assert res.visibility.dtype == torch.bool and res.confidence.shape == (5, 32, 48)
    fx, fy, cx, cy = clip.intrinsics
    assert torch.allclose(res.xyz[..., 0], (res.uv[..., 0] - cx) / fx * res.depth, atol=1e-4)
    assert torch.allclose(res.xyz[..., 2], res.depth)
    # numpy input, float video in [0, 255] and a (fx, fy, cx, cy) tuple give the same answer
    res2 = tracker.track(clip.video.astype(np.float32), clip.depth, intrinsics=clip.intrinsics)
    assert torch.allclose(res.uv, res2.uv, atol=1e-5) and torch.allclose(res.xyz, res2.xyz, atol=1e-4)


def test_bad_inputs_raise(tracker, clip):
    v, d = clip.video, clip.depth
    with pytest.raises(ValueError, match="frames"):
        tracker.track(v, d[:4])
    with pytest.raises(ValueError, match="positive"):
        tracker.track(v, -d)
    bad = d.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        tracker.track(v, bad)
    with pytest.raises(ValueError, match=r"\[T, 3, H, W\]"):
        tracker.track(v[:, :2], d)
    with pytest.raises(ValueError, match="multiple of 16"):
        tracker.track(v[:, :, :30], d[:, :30])
    with pytest.raises(ValueError, match="query_frame"):
        tracker.track(v, d, query_frame=9)
    with pytest.raises(ValueError, match="queries"):
        tracker.track_points(v, d, np.zeros((3, 2)))
    with pytest.raises(TypeError):
        tracker.track([1, 2], d)


def test_strict_inputs(tracker, clip):
    v, d = clip.video, clip.depth
    with pytest.raises(ValueError, match=r"\[0, 1\].*\* 255"):  # float video in [0, 1]: not silently read as dark
        tracker.track(v.astype(np.float32) / 255.0, d)
    tracker.track(v.astype(np.float32) / 255.0 * 255.0, d, iters=1)  # the same video in [0, 255] is accepted
    for iters in (0, -2, 1.5):
        with pytest.raises(ValueError, match="iters must be a positive integer"):
            tracker.track(v, d, iters=iters)
        with pytest.raises(ValueError, match="iters must be a positive integer"):
            tracker.track_points(v, d, [[0, 1.0, 1.0]], iters=iters)
    for thr in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"vis_threshold .* \[0, 1\]"):
            tracker.track(v, d, vis_threshold=thr)
        with pytest.raises(ValueError, match=r"vis_threshold .* \[0, 1\]"):
            tracker.track_points(v, d, [[0, 1.0, 1.0]], vis_threshold=thr)
    for budget in (-1.0, 0.0, float("nan")):
        with pytest.raises(ValueError, match="memory_budget_gb"):
            DeltaTracker(model=tracker.model, memory_budget_gb=budget)
    t, h, w = d.shape
    for empty in (np.zeros((0, 3)), [], torch.zeros(0, 4)):
        res = tracker.track_points(v, d, empty)
        assert res.uvd.shape == (t, 0, 3) and res.xyz.shape == (t, 0, 3) and res.visibility.shape == (t, 0)
    for q, what in (
        ([[0, -0.5, 3.0]], "off the image"),
        ([[0, w - 0.5, 3.0]], "off the image"),
        ([[0, 3.0, h + 2.0]], "off the image"),
        ([[t, 3.0, 3.0]], "frame"),
        ([[-1, 3.0, 3.0]], "frame"),
        ([[1.5, 3.0, 3.0]], "integers"),
    ):
        with pytest.raises(ValueError, match=what):
            tracker.track_points(v, d, q)
    with pytest.raises(ValueError, match="non-finite"):
        tracker.track_points(v, d, [[0, float("nan"), 3.0]])
    # edge pixels are on the image
    tracker.track_points(v, d, [[0, 0.0, 0.0], [t - 1, w - 1.0, h - 1.0]], iters=1, backward=False)
    with pytest.raises(ValueError, match="T=0"):
        tracker.track(v[:0], d[:0])
    with pytest.raises(ValueError, match="query_frame"):
        tracker.track(v, d, query_frame=1.5)


def test_frames_too_small_for_the_model():
    tr = DeltaTracker(DeltaConfig.micro())
    g = np.random.default_rng(0)
    v = g.integers(0, 255, (3, 3, 16, 16), dtype=np.uint8)
    with pytest.raises(ValueError, match="too small"):  # H/16 x W/16 = 1 pixel: instance norm cannot run
        tr.track(v, np.ones((3, 16, 16), np.float32))
    with pytest.raises(ValueError, match="too small"):
        DeltaTracker(DeltaConfig.micro().replace(model_resolution=(16, 16))).track(
            g.integers(0, 255, (3, 3, 40, 40), dtype=np.uint8), np.ones((3, 40, 40), np.float32)
        )
    v = g.integers(0, 255, (3, 3, 16, 32), dtype=np.uint8)  # the smallest accepted size runs
    assert tr.track(v, np.ones((3, 16, 32), np.float32)).uv.shape == (3, 16, 32, 2)


def test_backward_tracking_for_later_query_frame(tracker, clip):
    q = 2
    res = tracker.track(clip.video, clip.depth, query_frame=q)
    fwd = tracker.track(clip.video[q:], clip.depth[q:])
    bwd = tracker.track(clip.video[: q + 1][::-1].copy(), clip.depth[: q + 1][::-1].copy())
    assert res.uv.shape[0] == 5 and res.query_frame == q
    assert torch.allclose(res.uv[q:], fwd.uv, atol=1e-5)
    assert torch.allclose(res.uv[:q], bwd.uv.flip(0)[:q], atol=1e-5)
    nob = tracker.track(clip.video, clip.depth, query_frame=q, backward=False)
    assert torch.allclose(nob.uv[q:], fwd.uv, atol=1e-5)
    assert torch.equal(nob.uv[0], nob.uv[q]) and not nob.visibility[:q].any()


def test_track_points_with_backward_pass_and_chunking(tracker, clip):
    queries = torch.tensor([[0.0, 4.0, 5.0], [3.0, 20.0, 11.0], [4.0, 40.0, 30.0]])
    a = tracker.track_points(clip.video, clip.depth, queries.tolist())  # lists are accepted too
    b = tracker.track_points(clip.video, clip.depth, queries, chunk=1)
    assert a.uvd.shape == (5, 3, 3) and a.visibility.shape == (5, 3)
    assert torch.allclose(a.uvd, b.uvd, atol=1e-5)
    assert torch.allclose(a.xyz[..., 2], a.uvd[..., 2])
    nob = tracker.track_points(clip.video, clip.depth, queries, backward=False)
    assert torch.allclose(a.uvd[:, 0], nob.uvd[:, 0], atol=1e-5)  # query at frame 0: no backward part
    assert not torch.allclose(a.uvd[:3, 1], nob.uvd[:3, 1])  # query at frame 3: frames 0-2 come from the backward pass


def test_model_resolution_resizing(clip):
    torch.manual_seed(0)
    tr = DeltaTracker(DeltaConfig.micro().replace(model_resolution=(16, 32)))
    res = tr.track(clip.video, clip.depth)
    assert res.uv.shape == (5, 32, 48, 2) and torch.isfinite(res.uv).all()


def test_checkpoint_roundtrip_and_official_layout(tmp_path, clip):
    torch.manual_seed(0)
    model = DeltaModel(DeltaConfig.micro())
    path = tmp_path / "m.pt"
    save_checkpoint(model, path)
    tr = DeltaTracker.from_checkpoint(path)
    ref = DeltaTracker(model=model)
    assert torch.equal(tr.track(clip.video, clip.depth).uv, ref.track(clip.video, clip.depth).uv)
    assert torch.equal(DeltaTracker(str(path)).track(clip.video, clip.depth).uv, ref.track(clip.video, clip.depth).uv)
    with pytest.raises(ValueError, match="not found"):
        load_checkpoint(tmp_path / "nope.pt")


OFFICIAL_MANIFEST = Path(__file__).parents[1] / "src/iclr25/delta/weights/official_state_dict_manifest.json"


def _official_state_dict() -> dict:
    """A state dict with exactly the shipped official key/shape manifest; entry i is filled with the value i."""
    keys = json.loads(OFFICIAL_MANIFEST.read_text())["keys"]
    return {k: torch.full(tuple(shape), float(i)) for i, (k, shape) in enumerate(keys)}


def test_official_manifest_loads_strictly_without_renaming(tmp_path):
    sd = _official_state_dict()
    assert len(sd) == 482 and "updateformer.virual_tracks" in sd and "cmdtop.2.conv.2.1.bias" in sd
    # wrapped and "module."-prefixed as a DDP training checkpoint would be
    path = tmp_path / "densetrack3d.pth"
    torch.save({"model": {"module." + k: v for k, v in sd.items()}}, path)
    model = load_checkpoint(path)  # official config by default
    own = model.state_dict()
    assert list(own) == list(sd)  # same keys, same order: nothing renamed, nothing missing or extra
    for i, (k, v) in enumerate(own.items()):  # every tensor landed under its own name
        assert v.shape == sd[k].shape and bool((v == float(i)).all()), k


def test_official_manifest_one_wrong_shape_is_named():
    sd = _official_state_dict()
    sd["upsample_transformer.attnup_feat_cnn.res_blocks.0.norm1.weight"] = torch.zeros(64)
    with pytest.raises(ValueError, match=r"upsample_transformer\.attnup_feat_cnn\.res_blocks\.0\.norm1\.weight"):
        load_checkpoint(sd)
    sd = _official_state_dict()
    del sd["cmdtop.1.conv.0.0.weight"]
    with pytest.raises(ValueError, match=r"1 missing \['cmdtop\.1\.conv\.0\.0\.weight'\]"):
        load_checkpoint(sd)


def test_config_presets_and_validation():
    p = DeltaConfig.paper()
    assert p.token_dim == 1032 and p.corr_dim == 768 and p.window_len == 16 and p.hidden_size == 384
    assert p.upsample_dim == 192 and p.window_step == 8
    t = DeltaConfig.tiny()
    assert t.model_resolution is None and t.hidden_size < p.hidden_size
    assert DeltaConfig.from_dict(t.to_dict()) == t
    with pytest.raises(ValueError):
        DeltaConfig.paper().replace(num_heads=7)
    with pytest.raises(ValueError):
        DeltaConfig.from_dict({"nope": 1})
