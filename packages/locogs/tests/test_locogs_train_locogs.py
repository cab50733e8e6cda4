"""LocoGS training end to end on a tiny synthetic scene: it learns, masks and densifies, and resumes."""

from __future__ import annotations

import numpy as np
import torch

from iclr25.locogs import FieldConfig, LocoGS, LocoGSConfig, compress, decompress, train_locogs
from iclr25.locogs.data.ply import save_point_cloud
from iclr25.locogs.data.synthetic import make_synthetic_scene
from iclr25.locogs.metrics import psnr
from iclr25.locogs.renderer import render


def _cfg():
    cfg = LocoGSConfig(field=FieldConfig(n_levels=6, log2_hashmap_size=10), densify_from_iter=5,
                       densification_interval=10, densify_until_iter=25, densify_grad_threshold=1e-5,
                       sh_mask_start_iter=10, lambda_sh=0.05, sh_increase_interval=5)  # fmt: skip
    cfg.iterations = 24
    return cfg


def test_train_locogs_learns_and_compresses(tmp_path):
    scene = make_synthetic_scene(n_views=9, width=16, height=16, n_points=150, supersample=1)
    save_point_cloud(tmp_path / "init.ply", scene.points, scene.colors)  # the pcd_path API (dense init stand-in)
    res = train_locogs(scene, _cfg(), pcd_path=tmp_path / "init.ply", progress_bar=False,
                       checkpoint_path=tmp_path / "ck.pt")  # fmt: skip
    torch.manual_seed(0)
    init = LocoGS.from_points(scene.points, scene.colors, _cfg(), scene.extent)

    def mean_psnr(g):
        with torch.no_grad():
            return float(np.mean([psnr(render(g, c).image.clamp(0, 1), gt) for c, gt in scene.train()]))

    before = mean_psnr(init.gaussians()[0])
    assert res.history[-1]["n_gaussians"] != 150
    report = compress(res.model, tmp_path / "s.locogs")
    dec = decompress(tmp_path / "s.locogs")
    assert report.n_gaussians == len(dec)
    after = mean_psnr(dec)
    assert after > before + 0.5, (before, after)
    # the SH-band mask loss (on after sh_mask_start_iter) pushes the band logits down from their init of 1
    assert float((res.model.store["sh_mask"] < 1.0).float().mean()) > 0.9


def test_train_locogs_resume(tmp_path):
    scene = make_synthetic_scene(n_views=9, width=12, height=12, n_points=60, supersample=1)
    cfg = _cfg()
    cfg.iterations = 12
    full = train_locogs(scene, cfg, progress_bar=False)
    train_locogs(scene, cfg, progress_bar=False, checkpoint_path=tmp_path / "ck.pt", stop_at=6)
    res = train_locogs(scene, cfg, progress_bar=False, checkpoint_path=tmp_path / "ck.pt", resume=True)
    assert len(res.model) == len(full.model)
    torch.testing.assert_close(res.model.store["means"], full.model.store["means"], atol=1e-5, rtol=0)
