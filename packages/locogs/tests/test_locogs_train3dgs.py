"""The 3DGS baseline trainer: it learns, densifies, and resumes from checkpoints exactly."""

from __future__ import annotations

import torch

from iclr25.locogs.config import Train3DGSConfig
from iclr25.locogs.data.synthetic import make_synthetic_scene
from iclr25.locogs.metrics import psnr
from iclr25.locogs.optim import expon_lr
from iclr25.locogs.renderer import render
from iclr25.locogs.train3dgs import train_3dgs


def _scene():
    return make_synthetic_scene(n_views=9, width=20, height=16, n_points=150, supersample=1)


def test_expon_lr_schedule():
    assert expon_lr(0, 1.6e-4, 1.6e-6, 30000) == 1.6e-4
    assert abs(expon_lr(30000, 1.6e-4, 1.6e-6, 30000) - 1.6e-6) < 1e-18
    assert abs(expon_lr(15000, 1.0, 0.01, 30000) - 0.1) < 1e-12


def test_train_3dgs_learns_and_densifies():
    scene = _scene()
    cfg = Train3DGSConfig(densify_from_iter=10, densification_interval=10, densify_until_iter=25,
                          opacity_reset_interval=1000, densify_grad_threshold=1e-5)  # fmt: skip
    cfg.iterations = 30
    res = train_3dgs(scene, cfg, progress_bar=False)
    losses = [h["loss"] for h in res.history]
    assert losses[-1] < losses[0]
    assert res.history[-1]["n_gaussians"] != res.history[0]["n_gaussians"]  # densification / pruning happened
    cam, gt = scene.train()[0]
    assert psnr(render(res.gaussians, cam).image.clamp(0, 1), gt) > 12.0


def test_checkpoint_resume_is_exact(tmp_path):
    scene = _scene()
    cfg = Train3DGSConfig(densify_from_iter=2, densification_interval=3, densify_until_iter=7,
                          densify_grad_threshold=1e-5)  # fmt: skip
    cfg.iterations = 8
    full = train_3dgs(scene, cfg, progress_bar=False)
    ck = tmp_path / "ck.pt"
    cfg_half = Train3DGSConfig(**{**cfg.__dict__, "iterations": 5})
    train_3dgs(scene, cfg_half, checkpoint_path=ck, progress_bar=False)
    resumed = train_3dgs(scene, cfg, checkpoint_path=ck, resume=True, progress_bar=False)
    assert len(resumed.gaussians) == len(full.gaussians)
    torch.testing.assert_close(resumed.gaussians.means, full.gaussians.means, atol=1e-6, rtol=0)
