"""Losses on hand cases, baselines, training (loss goes down, EPE beats the zero-motion start), eval CLI, demo."""

import json
import math
import os

import numpy as np
import pytest
import torch

from iclr25.delta import DeltaConfig, DeltaModel, DeltaTracker, render_synthetic_clip
from iclr25.delta.baselines import flow_chaining, sparse_per_pixel, zero_motion
from iclr25.delta.checkpoint import save_checkpoint
from iclr25.delta.evaluate import evaluate_dataset, evaluate_dense_prediction
from iclr25.delta.losses import balanced_bce, confidence_loss, coords_loss, depth_loss, iteration_weights
from iclr25.delta.train import TrainConfig, gaussian_blur, make_sample, photometric_augment, train

torch.set_num_threads(1)


def test_coords_and_depth_losses_by_hand():
    gt = torch.zeros(1, 2)
    preds = [torch.tensor([[10.0, 0.0]]), torch.tensor([[0.0, 5.0]])]
    # image 11 x 21: normalisers (20, 10); iteration weights 0.8, 1 -> 0.8 * mean(10/20, 0) + 1 * mean(0, 5/10)
    assert iteration_weights(2) == [0.8, 1.0]
    assert coords_loss(preds, gt, (11, 21)).item() == pytest.approx(0.8 * 0.25 + 0.25)
    mask = torch.tensor([False])
    assert coords_loss(preds, gt, (11, 21), mask=mask).item() == 0.0
    # depth: dmax 4, gt 2 -> inverse 2; pred 4 -> inverse 1 (|1-2| = 1); pred 0.001 clamps to 0.01 -> 400
    d = depth_loss([torch.tensor([4.0]), torch.tensor([0.001])], torch.tensor([2.0]), 4.0)
    assert d.item() == pytest.approx(0.8 * 1.0 + 398.0)


def test_visibility_and_confidence_losses_by_hand():
    logits = torch.tensor([0.0, 0.0, 0.0, 0.0])
    target = torch.tensor([1.0, 0.0, 0.0, 0.0])
    # official balanced BCE: mean over positives + mean over negatives, summed (not halved)
    assert balanced_bce(logits, target).item() == pytest.approx(2 * math.log(2))
    logits = torch.tensor([100.0, 0.0, 0.0, 0.0])  # the one positive is perfect: only the negatives count
    assert balanced_bce(logits, target).item() == pytest.approx(math.log(2), rel=1e-5)
    valid = torch.tensor([1.0, 1.0, 0.0, 0.0])  # the valid mask restricts both classes
    logits = torch.tensor([0.0, 2.0, -50.0, -50.0])
    expected = math.log(2) + math.log1p(math.exp(2.0))
    assert balanced_bce(logits, target, valid).item() == pytest.approx(expected, rel=1e-6)
    # confidence: target [squared error normalised by (W-1, H-1) <= (12 / (W-1))^2]; image 11 x 25 -> 12 px in x is
    # exactly the threshold (included); 6 px in y is 6/10 > 12/24 normalised, so outside
    pred = torch.tensor([[12.0, 0.0], [0.0, 6.0], [0.0, 0.0]])
    gt = torch.zeros(3, 2)
    hw = (11, 25)
    conf = torch.tensor([100.0, -100.0, 100.0])
    vis = torch.tensor([True, True, True])
    assert confidence_loss(conf, pred, gt, vis, hw).item() < 1e-6
    conf_bad = torch.tensor([-100.0, 100.0, 100.0])  # wrong on points 0 and 1 (BCE 100 each)
    assert confidence_loss(conf_bad, pred, gt, vis, hw).item() == pytest.approx(200.0 / 3)
    # invisible points contribute 0 but stay in the denominator (official: mean over the valid set)
    vis = torch.tensor([True, False, True])
    assert confidence_loss(conf_bad, pred, gt, vis, hw).item() == pytest.approx(100.0 / 3)
    valid = torch.tensor([1.0, 1.0, 0.0])
    assert confidence_loss(conf_bad, pred, gt, vis, hw, valid).item() == pytest.approx(100.0 / 2)


def test_training_samples_late_queries_at_visible_frames():
    clip = render_synthetic_clip(seed=5, num_frames=6, height=32, width=32)
    tcfg = TrainConfig(num_frames=6, height=32, width=32, num_sparse=40, late_query_frac=0.5)
    s = make_sample(clip, 40, np.random.default_rng(0), tcfg=tcfg)
    q_t = s.queries[:, 0].long()
    assert (q_t[:20] > 0).any() and (q_t[20:] == 0).all()
    ar = torch.arange(40)
    flat_uv, flat_vis = s.uv.reshape(6, -1, 2)[:, s.q_index], s.visibility.reshape(6, -1)[:, s.q_index]
    assert flat_vis[q_t, ar].all()  # every query is visible at its query frame (eraser occlusions included)
    assert torch.equal(s.queries[:, 1:], flat_uv[q_t, ar])


def test_eraser_replace_blur_augmentations():
    g = torch.Generator().manual_seed(0)
    video = torch.rand(4, 3, 32, 32, generator=g) * 255
    yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    uv = torch.stack([xx, yy], -1).expand(4, 32, 32, 2)  # static tracks on the pixel centres
    vis0 = torch.ones(4, 32, 32, dtype=torch.bool)
    for eraser, replace in ((1.0, 0.0), (0.0, 1.0)):
        tcfg = TrainConfig(num_frames=4, height=32, width=32, eraser_prob=eraser, replace_prob=replace, blur_prob=0.0)
        out, vis = photometric_augment(video.clone(), uv, vis0.clone(), np.random.default_rng(1), tcfg)
        assert torch.equal(out[0], video[0]) and vis[0].all()  # the first frame is never touched
        changed = (out[1:] != video[1:]).any(1)
        assert changed.any()
        # exactly the painted pixels' tracks are occluded (random texture: every pixel in a box changes)
        assert torch.equal(vis[1:], ~changed)
    # blur: a constant image stays constant, an impulse spreads with unit mass
    img = torch.zeros(3, 9, 9)
    img[:, 4, 4] = 1.0
    b = gaussian_blur(img, 1.0)
    assert b.sum().item() == pytest.approx(3.0, rel=1e-5) and b[0, 4, 4] < 1.0 and b[0, 4, 5] > 0
    assert torch.allclose(gaussian_blur(torch.full((3, 9, 9), 7.0), 1.5), torch.full((3, 9, 9), 7.0))


@pytest.fixture(scope="module")
def clip():
    return render_synthetic_clip(seed=11, num_frames=5, height=32, width=32)


def test_baselines(clip):
    zm = zero_motion(clip.video, clip.depth)
    flow_norm = np.linalg.norm(np.stack([clip.flow(t) for t in range(1, 5)]), axis=-1)
    expected = flow_norm[clip.visibility[1:]].mean()  # standing still: the EPE is the mean visible flow magnitude
    assert evaluate_dense_prediction(zm.uv, zm.depth, zm.visibility, clip)["epe2d"] == pytest.approx(expected)
    fc = flow_chaining(clip.video, clip.depth, "dis")
    assert fc.uv.shape == (5, 32, 32, 2) and fc.visibility[0].all()
    ezm = evaluate_dense_prediction(zm.uv, zm.depth, zm.visibility, clip)
    efc = evaluate_dense_prediction(fc.uv, fc.depth, fc.visibility, clip)
    assert efc["epe2d"] < ezm["epe2d"]  # real flow beats standing still on moving scenes
    with pytest.raises(ValueError):
        flow_chaining(clip.video, clip.depth, "bogus")


def test_sparse_per_pixel_equals_grid_for_zero_motion_model(clip):
    torch.manual_seed(0)
    tr = DeltaTracker(model=DeltaModel(DeltaConfig.micro().replace(zero_init_head=True)))
    sp = sparse_per_pixel(tr, clip.video, clip.depth, chunk=200)
    zm = zero_motion(clip.video, clip.depth)
    assert np.allclose(sp.uv, zm.uv)


def test_training_lowers_loss_and_beats_zero_motion_start(tmp_path):
    torch.manual_seed(0)
    model = DeltaModel(DeltaConfig.micro().replace(zero_init_head=True))
    tcfg = TrainConfig(steps=25, lr=2e-3, num_frames=4, height=32, width=32, num_clips=1, augment=False, seed=5,
                       num_sparse=64, checkpoint=str(tmp_path / "state.pt"), checkpoint_every=10)  # fmt: skip
    clip = render_synthetic_clip(seed=5 * 100003, num_frames=4, height=32, width=32)
    tracker = DeltaTracker(model=model)
    r = tracker.track(clip.video, clip.depth)
    start = evaluate_dense_prediction(r.uv, r.depth, r.visibility, clip)
    zm = zero_motion(clip.video, clip.depth)
    assert start["epe2d"] == pytest.approx(evaluate_dense_prediction(zm.uv, zm.depth, zm.visibility, clip)["epe2d"])
    hist = train(model, tcfg, show_progress=False)
    r = tracker.track(clip.video, clip.depth)
    end = evaluate_dense_prediction(r.uv, r.depth, r.visibility, clip)
    first = np.mean([h["loss"] for h in hist[:5]])
    last = np.mean([h["loss"] for h in hist[-5:]])
    assert last < 0.8 * first
    assert end["epe2d"] < start["epe2d"]
    # resume: a finished checkpoint continues at its step count
    tcfg.steps = 27
    hist2 = train(model, tcfg, show_progress=False)
    assert len(hist2) == 27 and hist2[:25] == hist


@pytest.mark.slow
def test_overfit_one_clip_halves_zero_motion_epe():
    torch.manual_seed(0)
    model = DeltaModel(DeltaConfig.micro().replace(zero_init_head=True))
    tcfg = TrainConfig(steps=150, lr=2e-3, num_frames=4, height=32, width=32, num_clips=1, augment=False, seed=5,
                       num_sparse=64)  # fmt: skip
    clip = render_synthetic_clip(seed=5 * 100003, num_frames=4, height=32, width=32)
    zm = zero_motion(clip.video, clip.depth)
    base = evaluate_dense_prediction(zm.uv, zm.depth, zm.visibility, clip)["epe2d"]
    train(model, tcfg, show_progress=False)
    r = DeltaTracker(model=model).track(clip.video, clip.depth)
    assert evaluate_dense_prediction(r.uv, r.depth, r.visibility, clip)["epe2d"] < 0.5 * base


def test_eval_cli_on_written_benchmark_files(tmp_path, clip, capsys):
    from iclr25.delta.cli import main
    from iclr25.delta.data.cvo import write_cvo_npz
    from iclr25.delta.data.kubric import write_kubric_dense
    from iclr25.delta.data.tapvid3d import write_tapvid3d_npz

    torch.manual_seed(0)
    ckpt = tmp_path / "m.pt"
    save_checkpoint(DeltaModel(DeltaConfig.micro().replace(zero_init_head=True)), ckpt)
    (tmp_path / "tv3d").mkdir()
    write_tapvid3d_npz(tmp_path / "tv3d" / "a.npz", clip, num_tracks=20, query_mode="random")
    write_kubric_dense(tmp_path / "kub", "s0", clip)
    (tmp_path / "cvo").mkdir()
    write_cvo_npz(tmp_path / "cvo" / "a.npz", clip)
    res = evaluate_dataset("tapvid3d", str(tmp_path / "tv3d"), str(ckpt))
    assert res["num_videos"] == 1 and 0.0 <= res["average_jaccard"] <= 1.0 and 0 <= res["occlusion_accuracy"] <= 1
    res = evaluate_dataset("kubric", str(tmp_path / "kub"), str(ckpt))
    assert set(res) >= {"average_jaccard", "average_pts_within_thresh", "occlusion_accuracy"}
    assert main(["eval", "--dataset", "cvo", "--path", str(tmp_path / "cvo"), "--checkpoint", str(ckpt)]) == 0
    out = json.loads(capsys.readouterr().out)
    zero_epe = np.linalg.norm(clip.flow(4), axis=-1).mean()  # the zero-motion model predicts zero flow
    assert out["epe_all"] == pytest.approx(zero_epe, rel=1e-4)
    assert out["model"] == str(ckpt.resolve())  # the report names the model it evaluated
    with pytest.raises(ValueError):
        evaluate_dataset("bogus", str(tmp_path), str(ckpt))
    with pytest.raises(ValueError, match="explicit checkpoint"):
        evaluate_dataset("cvo", str(tmp_path / "cvo"), None)
    with pytest.raises(SystemExit):  # the CLI refuses to guess a model
        main(["eval", "--dataset", "cvo", "--path", str(tmp_path / "cvo")])


def test_train_cli_2d_then_3d(tmp_path, capsys):
    from iclr25.delta.cli import main

    s2d, s3d = tmp_path / "s2d.pt", tmp_path / "s3d.pt"
    base = [
        "train",
        "--config",
        "micro",
        "--steps",
        "2",
        "--frames",
        "4",
        "--size",
        "32",
        "--quiet",
        "--zero-init-head",
    ]
    assert main(base + ["--stage", "2d", "--checkpoint", str(s2d)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["steps"] == 2 and s2d.exists()
    assert main(base + ["--stage", "3d", "--init", str(s2d), "--checkpoint", str(s3d)]) == 0
    assert DeltaTracker.from_checkpoint(s3d).cfg == DeltaConfig.micro().replace(zero_init_head=True)
    state = torch.load(s3d, weights_only=False)
    assert state["train_config"]["stage"] == "3d" and state["step"] == 2
    # export: the model alone (no optimizer), with the training configuration the demo reads its resolution from
    from iclr25.delta.demo import trained_size

    capsys.readouterr()
    slim = tmp_path / "model.pt"
    assert main(["export", str(s3d), str(slim)]) == 0
    extra = json.loads(capsys.readouterr().out)
    assert extra["step"] == 2 and extra["train"]["stage"] == "3d" and trained_size(str(slim)) == 32
    assert extra["trained_dense_depth"] == extra["dense_depth"] == "absolute"
    assert main(["export", str(s3d), str(tmp_path / "ratio.pt"), "--dense-depth", "log_ratio"]) == 0
    assert json.loads(capsys.readouterr().out)["dense_depth"] == "log_ratio"
    assert DeltaTracker.from_checkpoint(tmp_path / "ratio.pt").cfg.dense_depth == "log_ratio"
    exported = DeltaTracker.from_checkpoint(slim).model.state_dict()
    assert all(torch.equal(exported[k], v) for k, v in state["state_dict"].items())
    assert "optimizer" not in torch.load(slim, weights_only=False)
    with pytest.raises(ValueError, match="training state not found"):
        main(["export", str(tmp_path / "absent.pt"), str(tmp_path / "again.pt")])
    with pytest.raises(ValueError, match="not a delta training state"):
        main(["export", str(slim), str(tmp_path / "again.pt")])


def test_demo_says_plainly_when_no_trained_model_is_used(tmp_path, capsys, monkeypatch):
    from iclr25.delta import demo

    monkeypatch.setattr(demo, "WEIGHTS", str(tmp_path / "absent.pt"))  # as if no checkpoint shipped
    png = tmp_path / "tracks.png"
    summary = demo.run_demo(num_clips=2, out_png=str(png), threads=1, sparse_timing=False)
    out = capsys.readouterr().out
    assert (
        "NO TRAINED MODEL" in out and summary["uses_checkpoint"] is False and summary["model"].startswith("untrained")
    )
    assert png.stat().st_size > 0
    # the untrained model's uv is the zero-motion answer (its depth is the upsampled H/4 grid depth)
    assert summary["DELTA (dense)"]["epe2d"] == pytest.approx(summary["zero motion"]["epe2d"], rel=1e-5)
    ckpt = tmp_path / "m.pt"
    save_checkpoint(DeltaModel(DeltaConfig.micro().replace(zero_init_head=True)), ckpt)
    summary = demo.run_demo(num_clips=2, out_png=None, threads=1, sparse_timing=False, checkpoint=str(ckpt))
    assert summary["uses_checkpoint"] is True and "NO TRAINED MODEL" not in capsys.readouterr().out


def test_shipped_model_beats_zero_motion_on_unseen_clips():
    """The shipped micro checkpoint, on clips no training or model selection used (seeds 950000+): higher APD3D and
    AJ3D and lower 2D EPE than zero motion, averaged over the clips (the demo reports the paired intervals)."""
    from iclr25.delta import demo

    assert os.path.isfile(demo.WEIGHTS), "the trained micro checkpoint must ship with the package"
    size = demo.trained_size(demo.WEIGHTS)
    tracker = DeltaTracker.from_checkpoint(demo.WEIGHTS)
    model_rows, zero_rows = [], []
    for i in range(8):
        clip = render_synthetic_clip(seed=950_000 + i, num_frames=8, height=size, width=size)
        r = tracker.track(clip.video, clip.depth, intrinsics=clip.K)
        model_rows.append(evaluate_dense_prediction(r.uv, r.depth, r.visibility, clip))
        z = zero_motion(clip.video, clip.depth)
        zero_rows.append(evaluate_dense_prediction(z.uv, z.depth, z.visibility, clip))
    mean = {k: (np.mean([r[k] for r in model_rows]), np.mean([r[k] for r in zero_rows])) for k in model_rows[0]}
    assert mean["apd3d"][0] > mean["apd3d"][1], mean
    assert mean["aj3d"][0] > mean["aj3d"][1], mean
    assert mean["epe2d"][0] < mean["epe2d"][1], mean
