"""LocoGS training (official ``train.py`` schedule): photometric + mask losses, two Adam optimisers, densification
that re-queries the field for new Gaussians, mask pruning."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr25.shared import progress

from .config import LocoGSConfig
from .data.ply import load_point_cloud
from .data.scene import Scene
from .model import LocoGS
from .optim import DensifyStats, expon_lr
from .renderer import render
from .train3dgs import split_samples
from .training import CameraSampler, load_checkpoint, photometric_loss, save_checkpoint

SH_BAND_WEIGHTS = (3 / 15, 5 / 15, 7 / 15)  # (2l + 1) / 15 for l = 1, 2, 3


@dataclass
class LocoGSResult:
    model: LocoGS
    history: list[dict] = field(default_factory=list)
    iterations: int = 0
    seconds: float = 0.0
    mask_pruned: int = 0  # Gaussians removed because their mask fell to the threshold (LocoGS's masking at work)


def mask_losses(aux: dict, cfg: LocoGSConfig, it: int, active_degree: int) -> torch.Tensor:
    """lambda_mask mean(M) + lambda_sh [t > 15000] sum_{l <= active} (2l + 1)/15 mean(H_l)."""
    loss = cfg.lambda_mask * aux["mask"].mean()
    if it > cfg.sh_mask_start_iter:
        for band in range(1, active_degree + 1):
            loss = loss + cfg.lambda_sh * SH_BAND_WEIGHTS[band - 1] * aux["sh_mask"][:, band - 1].mean()
    return loss


def field_lr(cfg: LocoGSConfig, name: str, step: int) -> float:
    lr0, lr1 = {"grid": cfg.grid_lr, "opacity": cfg.opacity_mlp_lr, "sh": cfg.sh_mlp_lr, "scale": cfg.scale_mlp_lr,
                "rotation": cfg.rotation_mlp_lr}[name]  # fmt: skip
    return expon_lr(step, lr0, lr1, cfg.iterations, cfg.field_lr_delay_steps, cfg.field_lr_delay_mult)


@torch.no_grad()
def densify_and_prune_locogs(model: LocoGS, stats: DensifyStats, cfg: LocoGSConfig, prune_big: bool, gen=None):
    """Clone / split on the view-space gradient (children inherit only the explicit attributes, their field
    attributes are re-queried at the new positions), then prune masked, transparent and oversized Gaussians."""
    store, extent = model.store, model.extent
    g, aux = model.gaussians()
    grads = stats.mean_grad()
    big = aux["scales"].max(dim=1).values > cfg.percent_dense * extent
    clone = (grads >= cfg.densify_grad_threshold) & ~big
    room = cfg.max_gaussians - len(store)
    if clone.any() and room > 0:
        idx = torch.nonzero(clone).squeeze(1)[:room]
        store.append({k: store[k].detach()[idx] for k in store.params})
        stats.extend(len(idx))
    n_old = big.numel()
    n = len(store)
    pad = torch.zeros(n - n_old, dtype=torch.bool, device=big.device)
    split = torch.cat([(grads >= cfg.densify_grad_threshold) & big, pad])
    room = cfg.max_gaussians - n  # a split adds two children and removes the parent: +1 each
    if split.any() and room >= 1:
        idx = torch.nonzero(split).squeeze(1)[:room]
        split = torch.zeros_like(split)
        split[idx] = True
        new = {k: store[k].detach()[idx].repeat(2, *([1] * (store[k].dim() - 1))) for k in store.params}
        new["means"] = split_samples(g.means[idx], aux["scales"][idx], g.quats[idx], 2, gen)
        new["scale_base"] = new["scale_base"] - np.log(1.6)
        store.append(new)
        stats.extend(2 * len(idx))
        keep = torch.cat([~split, torch.ones(2 * len(idx), dtype=torch.bool, device=split.device)])
        store.keep(keep)
        stats.keep(keep)
    # re-query the field: new Gaussians get their own opacity / scale from their positions
    _, aux = model.gaussians()
    prune = (aux["mask"] <= cfg.mask_threshold) | (aux["opacity"] < cfg.min_opacity)
    if prune_big:
        prune |= stats.max_radii > cfg.max_screen_size
        prune |= aux["scales"].max(dim=1).values > cfg.big_scale_fraction * extent
    masked = aux["mask"] <= cfg.mask_threshold
    _prune(model, stats, prune)
    return int((masked & prune).sum())


def _prune(model, stats, prune):
    if prune.all():
        prune[0] = False
    model.store.keep(~prune)
    stats.keep(~prune)
    return int(prune.sum())


def train_locogs(
    scene: Scene,
    cfg: LocoGSConfig | None = None,
    iterations: int | None = None,
    pcd_path=None,
    checkpoint_path=None,
    checkpoint_every: int = 0,
    resume: bool = False,
    device: str = "cpu",
    backend: str = "auto",
    progress_bar: bool = True,
    stop_at: int | None = None,
) -> LocoGSResult:
    """Train LocoGS on ``scene``. Initial points: ``pcd_path`` (any PLY / NPY / NPZ: the dense-init cloud) or the
    scene's own points. ``iterations`` compresses the official 30k schedule. ``stop_at`` ends this session early
    (checkpoint written) so a later call with ``resume=True`` continues the same schedule."""
    cfg = cfg or LocoGSConfig()
    if iterations is not None and iterations != cfg.iterations:
        cfg = cfg.scaled(iterations)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    train = scene.train()
    sampler = CameraSampler(len(train), cfg.seed)
    start, history, mask_pruned, prior_s = 0, [], 0, 0.0
    if resume and checkpoint_path is not None and os.path.exists(checkpoint_path):
        ck = load_checkpoint(checkpoint_path, "locogs")
        model = LocoGS.from_state(ck["model"], cfg, backend).to(device)
        start, history, mask_pruned = ck["iteration"], ck["history"], ck.get("mask_pruned", 0)
        prior_s = ck.get("seconds", 0.0)
        sampler.load_state_dict(ck["sampler"])
        gen.set_state(ck["generator"])
    else:
        pts, cols = load_point_cloud(pcd_path) if pcd_path is not None else (scene.points, scene.colors)
        model = LocoGS.from_points(pts, cols, cfg, scene.extent, backend)
        model.field.to(device)
        model.store = type(model.store)({k: v.to(device) for k, v in model.store.params.items()},
                                        model._explicit_lrs(0), cfg.adam_eps)  # fmt: skip
    field_opt = torch.optim.Adam(model.field_param_groups(), lr=0.0, eps=cfg.adam_eps)
    if start > 0:
        field_opt.load_state_dict(ck["field_opt"])
    stats = DensifyStats(len(model), device)
    if start > 0:
        stats.grad_accum, stats.denom, stats.max_radii = (t.to(device) for t in ck["stats"])
    bg = torch.tensor(cfg.background, device=device)
    extent = model.extent
    t0 = time.perf_counter()
    last = cfg.iterations if stop_at is None else min(stop_at, cfg.iterations)
    steps = range(start + 1, last + 1)
    for it in progress(steps, desc="LocoGS") if progress_bar else steps:
        model.store.set_lr("means", expon_lr(it, cfg.position_lr_init * extent, cfg.position_lr_final * extent,
                                             cfg.position_lr_max_steps))  # fmt: skip
        for grp in field_opt.param_groups:
            grp["lr"] = field_lr(cfg, grp["name"], it)
        active = min(cfg.sh_degree, (it - 1) // cfg.sh_increase_interval)
        cam, gt = train[sampler.next()]
        cam, gt = cam.to(device), gt.to(device)
        g, aux = model.gaussians()
        out = render(g, cam, bg, sh_degree=active, backend=backend)
        out.projected.means2d.retain_grad()
        loss = photometric_loss(out.image, gt, cfg.lambda_dssim) + mask_losses(aux, cfg, it, active)
        loss.backward()
        with torch.no_grad():
            if it < cfg.densify_until_iter:
                stats.add(out.projected.means2d.grad, out.projected.radii, cam.width, cam.height)
            model.store.opt.step()
            field_opt.step()
            model.store.opt.zero_grad(set_to_none=True)
            field_opt.zero_grad(set_to_none=True)
            if it < cfg.densify_until_iter and it > cfg.densify_from_iter and it % cfg.densification_interval == 0:
                mask_pruned += densify_and_prune_locogs(model, stats, cfg, it > cfg.big_prune_from_iter, gen)
                stats.reset(len(model), device)
            elif it >= cfg.densify_until_iter and it % cfg.mask_prune_interval == 0:
                mask_pruned += _prune(model, stats, torch.sigmoid(model.store["mask"]) <= cfg.mask_threshold)
        if it % 10 == 0 or it == cfg.iterations:
            history.append({"iteration": it, "loss": loss.item(), "n_gaussians": len(model)})
        if checkpoint_path is not None and ((checkpoint_every and it % checkpoint_every == 0) or it == last):
            save_checkpoint(checkpoint_path, {"kind": "locogs", "model": model.state(), "iteration": it,
                                              "history": history, "mask_pruned": mask_pruned,
                                              "seconds": prior_s + time.perf_counter() - t0, "sampler": sampler.state_dict(),
                                              "generator": gen.get_state(),
                                              "field_opt": field_opt.state_dict(),
                                              "stats": (stats.grad_accum, stats.denom, stats.max_radii)})  # fmt: skip
    return LocoGSResult(model, history, cfg.iterations, prior_s + time.perf_counter() - t0, mask_pruned)
