"""The plain 3D Gaussian Splatting trainer (the baseline LocoGS compresses against)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr25.shared import progress

from .config import Train3DGSConfig
from .data.knn import mean_sq_dist_knn
from .data.scene import Scene
from .gaussians import GaussianSet
from .optim import DensifyStats, ParamStore, expon_lr
from .projection import quat_to_rotmat
from .renderer import render
from .sh import rgb_to_sh
from .training import CameraSampler, load_checkpoint, photometric_loss, save_checkpoint


@dataclass
class TrainResult:
    gaussians: GaussianSet
    history: list[dict] = field(default_factory=list)
    iterations: int = 0
    seconds: float = 0.0


def _lrs(cfg: Train3DGSConfig, extent: float) -> dict[str, float]:
    return {"means": cfg.position_lr_init * extent, "sh_dc": cfg.feature_lr, "sh_rest": cfg.feature_lr / 20.0,
            "opacity": cfg.opacity_lr, "log_scales": cfg.scaling_lr, "quats": cfg.rotation_lr}  # fmt: skip


def init_3dgs_params(points, colors, cfg: Train3DGSConfig) -> dict[str, torch.Tensor]:
    """3DGS ``create_from_pcd``: DC from colours, isotropic scale from 3-NN distance, identity rotation,
    opacity 0.1."""
    pts = torch.as_tensor(np.asarray(points), dtype=torch.float32)
    n = len(pts)
    if n == 0:
        raise ValueError("cannot initialise Gaussians from an empty point cloud")
    k = (cfg.sh_degree + 1) ** 2
    dist2 = torch.as_tensor(mean_sq_dist_knn(pts.numpy()), dtype=torch.float32)
    quats = torch.zeros(n, 4)
    quats[:, 0] = 1
    return {
        "means": pts,
        "sh_dc": rgb_to_sh(torch.as_tensor(np.asarray(colors), dtype=torch.float32))[:, None, :],
        "sh_rest": torch.zeros(n, k - 1, 3),
        "opacity": torch.logit(torch.full((n,), cfg.init_opacity)),
        "log_scales": torch.log(torch.sqrt(dist2))[:, None].repeat(1, 3),
        "quats": quats,
    }


def gaussians_from_store(store: ParamStore) -> GaussianSet:
    return GaussianSet(
        means=store["means"],
        quats=store["quats"],
        scales=torch.exp(store["log_scales"]),
        opacities=torch.sigmoid(store["opacity"]),
        sh=torch.cat([store["sh_dc"], store["sh_rest"]], dim=1),
    )


def split_samples(means, scales, quats, n_split: int = 2, generator=None):
    """3DGS split: n children per parent sampled from N(mu, R diag(s^2) R^T)."""
    s = scales.repeat(n_split, 1)
    z = torch.randn(s.shape, generator=generator, device=s.device) * s
    rots = quat_to_rotmat(quats).repeat(n_split, 1, 1)
    return torch.bmm(rots, z[..., None]).squeeze(-1) + means.repeat(n_split, 1)


def densify_and_prune_3dgs(store: ParamStore, stats: DensifyStats, cfg: Train3DGSConfig, extent: float,
                           prune_big_screen: bool, generator=None) -> None:  # fmt: skip
    """Clone small Gaussians with a large view-space gradient, split large ones into 2 (scale / 1.6), then prune
    transparent and oversized ones (3DGS ``densify_and_prune``)."""
    with torch.no_grad():
        grads = stats.mean_grad()
        scales = torch.exp(store["log_scales"])
        big = scales.max(dim=1).values > cfg.percent_dense * extent
        room = cfg.max_gaussians - len(store)
        clone = (grads >= cfg.densify_grad_threshold) & ~big
        if room > 0 and clone.any():
            idx = torch.nonzero(clone).squeeze(1)[:room]
            store.append({k: store[k].detach()[idx] for k in store.params})
            stats.extend(len(idx))
        n = len(store)
        grads = torch.cat([grads, grads.new_zeros(n - grads.numel())])
        scales = torch.exp(store["log_scales"])
        split = (grads >= cfg.densify_grad_threshold) & (scales.max(dim=1).values > cfg.percent_dense * extent)
        room = cfg.max_gaussians - len(store)  # a split adds two children and removes the parent: +1 each
        if split.any() and room >= 1:
            idx = torch.nonzero(split).squeeze(1)[:room]
            split = torch.zeros_like(split)
            split[idx] = True
            new = {k: store[k].detach()[idx].repeat(2, *([1] * (store[k].dim() - 1))) for k in store.params}
            new["means"] = split_samples(store["means"][idx], scales[idx], store["quats"][idx], 2, generator)
            new["log_scales"] = torch.log(scales[idx] / (0.8 * 2)).repeat(2, 1)
            store.append(new)
            stats.extend(2 * len(idx))
            keep = torch.cat([~split, torch.ones(2 * len(idx), dtype=torch.bool, device=split.device)])
            store.keep(keep)
            stats.keep(keep)
        prune = torch.sigmoid(store["opacity"]) < cfg.min_opacity
        if prune_big_screen:
            prune |= stats.max_radii > cfg.max_screen_size
            prune |= torch.exp(store["log_scales"]).max(dim=1).values > cfg.big_scale_fraction * extent
        if prune.all():  # never delete everything
            prune[torch.argmax(store["opacity"])] = False
        store.keep(~prune)
        stats.keep(~prune)


def _checkpoint(store, stats, it, history, sampler, gen, seconds=0.0) -> dict:
    return {"kind": "3dgs", "store": store.state_dict(), "iteration": it, "history": history, "seconds": seconds,
            "sampler": sampler.state_dict(), "generator": gen.get_state(),
            "stats": (stats.grad_accum, stats.denom, stats.max_radii)}  # fmt: skip


def train_3dgs(
    scene: Scene,
    cfg: Train3DGSConfig | None = None,
    iterations: int | None = None,
    checkpoint_path=None,
    checkpoint_every: int = 0,
    resume: bool = False,
    device: str = "cpu",
    backend: str = "auto",
    progress_bar: bool = True,
    callback=None,
) -> TrainResult:
    """Train 3DGS on ``scene``'s training views. ``iterations`` compresses the official 30k schedule
    (``cfg.scaled``). With ``checkpoint_path``, saves every ``checkpoint_every`` steps and at the end; ``resume``
    continues from that file."""
    cfg = cfg or Train3DGSConfig()
    if iterations is not None and iterations != cfg.iterations:
        cfg = cfg.scaled(iterations)
    extent = scene.extent
    lrs = _lrs(cfg, extent)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    train = scene.train()
    sampler = CameraSampler(len(train), cfg.seed)
    start, history, prior_s = 0, [], 0.0
    if resume and checkpoint_path is not None and __import__("os").path.exists(checkpoint_path):
        ck = load_checkpoint(checkpoint_path, "3dgs")
        store = ParamStore({k: v.to(device) for k, v in ck["store"]["params"].items()}, lrs, cfg.adam_eps)
        store.opt.load_state_dict(ck["store"]["opt"])
        sampler.load_state_dict(ck["sampler"])
        gen.set_state(ck["generator"])
        start, history, prior_s = ck["iteration"], ck["history"], ck.get("seconds", 0.0)
    else:
        store = ParamStore({k: v.to(device) for k, v in init_3dgs_params(scene.points, scene.colors, cfg).items()},
                           lrs, cfg.adam_eps)  # fmt: skip
    stats = DensifyStats(len(store), device)
    if start > 0:
        stats.grad_accum, stats.denom, stats.max_radii = (t.to(device) for t in ck["stats"])
    bg = torch.tensor(cfg.background, device=device)
    t0 = time.perf_counter()
    it_range = range(start + 1, cfg.iterations + 1)
    for it in progress(it_range, desc="3DGS", disable=not progress_bar) if progress_bar else it_range:
        store.set_lr("means", expon_lr(it, cfg.position_lr_init * extent, cfg.position_lr_final * extent,
                                       cfg.position_lr_max_steps))  # fmt: skip
        active = min(cfg.sh_degree, (it - 1) // cfg.sh_increase_interval)
        cam, gt = train[sampler.next()]
        cam, gt = cam.to(device), gt.to(device)
        out = render(gaussians_from_store(store), cam, bg, sh_degree=active, backend=backend)
        out.projected.means2d.retain_grad()
        loss = photometric_loss(out.image, gt, cfg.lambda_dssim)
        loss.backward()
        with torch.no_grad():
            if it < cfg.densify_until_iter:
                stats.add(out.projected.means2d.grad, out.projected.radii, cam.width, cam.height)
                if it > cfg.densify_from_iter and it % cfg.densification_interval == 0:
                    densify_and_prune_3dgs(store, stats, cfg, extent, it > cfg.opacity_reset_interval, gen)
                    stats.reset(len(store), device)
                if it % cfg.opacity_reset_interval == 0:
                    op = torch.minimum(
                        torch.sigmoid(store["opacity"]), torch.full_like(store["opacity"], cfg.reset_opacity)
                    )
                    store.replace("opacity", torch.logit(op))
            store.opt.step()
            store.opt.zero_grad(set_to_none=True)
        if it % 10 == 0 or it == cfg.iterations:
            history.append({"iteration": it, "loss": loss.item(), "n_gaussians": len(store)})
        if callback is not None:
            callback(it, store, loss.item())
        if checkpoint_path is not None and checkpoint_every and it % checkpoint_every == 0:
            save_checkpoint(checkpoint_path, _checkpoint(store, stats, it, history, sampler, gen,
                                                         prior_s + time.perf_counter() - t0))  # fmt: skip
    if checkpoint_path is not None:
        save_checkpoint(checkpoint_path, _checkpoint(store, stats, cfg.iterations, history, sampler, gen,
                                                     prior_s + time.perf_counter() - t0))  # fmt: skip
    with torch.no_grad():
        g = gaussians_from_store(store).detach()
    return TrainResult(g, history, cfg.iterations, prior_s + time.perf_counter() - t0)  # seconds over all sessions
