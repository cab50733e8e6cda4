"""The demo behind ``python -m iclr25.locogs demo``: 3DGS baseline vs LocoGS on the synthetic scene.

Both methods train on the same views with the same compressed schedule (``Config.scaled``: opacity resets keep their
recovery time, mask learning rates scale with the schedule). Renders of the two models are timed interleaved in one
run (median and spread of repeats) on the same test cameras; the table also reports the work a render does (pixel-
Gaussian pairs blended), the Gaussians removed by LocoGS's masks, and the per-Gaussian SH degrees.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import torch

from iclr25.shared import atomic_write

from .codec import compress, decompress
from .config import DEFAULT_RASTER, FieldConfig, LocoGSConfig, Train3DGSConfig
from .data.ply import write_3dgs_ply
from .data.scene import save_image
from .data.synthetic import make_synthetic_scene
from .kernels.reference import contributing_pairs
from .metrics import LPIPS, psnr, ssim
from .projection import project_gaussians
from .renderer import render
from .train3dgs import train_3dgs
from .train_locogs import train_locogs

# the --full run: a scale at which masking and adaptive SH act (>= 20k Gaussians, 128^2 images)
FULL = {"views": 32, "size": 128, "points": 20000, "iterations": 100, "max_gaussians": 25000, "log2_hashmap": 14}


def evaluate(gaussians, views, lpips_model=None) -> dict:
    """Mean and standard deviation over views of PSNR, SSIM (and LPIPS when weights were given)."""
    ps, ss, lp = [], [], []
    with torch.no_grad():
        for cam, gt in views:
            img = render(gaussians, cam).image.clamp(0, 1)
            ps.append(psnr(img, gt))
            ss.append(float(ssim(img, gt)))
            if lpips_model is not None:
                lp.append(float(lpips_model(img, gt).mean()))

    def ms(v):
        return (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0) if v else (float("nan"), 0.0)

    return {"psnr": ms(ps), "ssim": ms(ss), "lpips": ms(lp) if lp else None}


def pair_count(gaussians, views) -> int:
    """Pixel-Gaussian pairs blended over all ``views`` (the rasterizer's work, independent of timing noise)."""
    total = 0
    with torch.no_grad():
        for cam, _ in views:
            g = gaussians
            proj = project_gaussians(g.means, g.quats, g.scales, cam.viewmat, cam.K, cam.width, cam.height)
            total += contributing_pairs(proj.means2d, proj.conics, g.opacities, proj.depths, proj.radii, cam.width,
                                        cam.height, DEFAULT_RASTER)  # fmt: skip
    return total


def interleaved_render_times(models: dict, views, repeat: int = 5, warmup: int = 1) -> dict:
    """Seconds per frame of each model over ``views``, measured interleaved (model A, model B, A, B, ...) in one run:
    median and (min, max) of ``repeat`` repeats after ``warmup`` rounds."""
    times = {name: [] for name in models}
    with torch.no_grad():
        for r in range(warmup + repeat):
            for name, g in models.items():
                t0 = time.perf_counter()
                for cam, _ in views:
                    render(g, cam)
                if r >= warmup:
                    times[name].append((time.perf_counter() - t0) / len(views))
    return {n: {"median": statistics.median(t), "min": min(t), "max": max(t), "repeats": len(t)}
            for n, t in times.items()}  # fmt: skip


def _apply_full(args) -> None:
    for k, v in FULL.items():
        if getattr(args, k) is None:
            setattr(args, k, v)


def run_demo(args) -> dict:
    if getattr(args, "full", False):
        _apply_full(args)
    for k, v in {"views": 24, "size": 32, "points": 1000, "iterations": 150, "max_gaussians": 3000,
                 "log2_hashmap": 12}.items():  # fmt: skip
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    resume = bool(getattr(args, "resume", False))
    ck_every = max(10, args.iterations // 10)
    lpips_model = LPIPS().load_weights(args.lpips_weights) if getattr(args, "lpips_weights", None) else None
    t0 = time.perf_counter()
    scene = make_synthetic_scene(n_views=args.views, width=args.size, height=args.size, n_points=args.points,
                                 seed=args.seed)  # fmt: skip
    print(f"synthetic scene (seed {args.seed}): {len(scene.train_idx)} train / {len(scene.test_idx)} test views at "
          f"{args.size}x{args.size}, {len(scene.points)} initial points ({time.perf_counter() - t0:.1f}s)",
          flush=True)  # fmt: skip
    test_views = scene.test()
    cfg3 = Train3DGSConfig(seed=args.seed, max_gaussians=args.max_gaussians).scaled(args.iterations)
    print(f"3DGS schedule: {args.iterations} steps, opacity reset every {cfg3.opacity_reset_interval} steps until "
          f"{cfg3.densify_until_iter}, densify every {cfg3.densification_interval}", flush=True)  # fmt: skip
    stage = getattr(args, "stage", "all")
    if stage in ("all", "3dgs"):
        base = train_3dgs(scene, cfg3, checkpoint_path=out / "3dgs.ckpt", checkpoint_every=ck_every, resume=resume)
    if stage != "all":
        if stage == "locogs":
            lcfg = LocoGSConfig(field=FieldConfig(log2_hashmap_size=args.log2_hashmap), seed=args.seed,
                                max_gaussians=args.max_gaussians).scaled(args.iterations)  # fmt: skip
            train_locogs(scene, lcfg, checkpoint_path=out / "locogs.ckpt", checkpoint_every=ck_every, resume=resume)
        print(f"stage {stage}: trained, checkpoint in {out}/ (finish with --resume)", flush=True)
        return {}
    g3 = base.gaussians
    print(f"3DGS trained: {len(g3)} Gaussians in {base.seconds:.0f}s", flush=True)
    write_3dgs_ply(out / "baseline.ply", g3)
    ply_bytes = os.path.getsize(out / "baseline.ply")
    result = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "ply_bytes": ply_bytes, "methods": {}}  # fmt: skip
    rows = {"3DGS": {"train": evaluate(g3, scene.train()), "test": evaluate(g3, test_views, lpips_model),
                     "bytes": ply_bytes, "n": len(g3), "train_s": base.seconds, "bytes_per_gaussian": ply_bytes / len(g3),
                     "sh_degrees": [0, 0, 0, len(g3)] if g3.sh_degree == 3 else None,
                     "pairs": pair_count(g3, test_views)}}  # fmt: skip
    models = {"3DGS": g3}
    images = {"3DGS": render(g3, test_views[0][0]).image.clamp(0, 1)}
    if not args.baseline:
        lcfg = LocoGSConfig(field=FieldConfig(log2_hashmap_size=args.log2_hashmap), seed=args.seed,
                            max_gaussians=args.max_gaussians).scaled(args.iterations)  # fmt: skip
        print(f"LocoGS schedule: {args.iterations} steps, mask lr {lcfg.mask_lr:.3g}, SH-mask lr {lcfg.sh_mask_lr:.3g}"
              f" (SH-mask loss from step {lcfg.sh_mask_start_iter})", flush=True)  # fmt: skip
        res = train_locogs(scene, lcfg, checkpoint_path=out / "locogs.ckpt", checkpoint_every=ck_every,
                           resume=resume)  # fmt: skip
        print(f"LocoGS trained: {len(res.model)} Gaussians in {res.seconds:.0f}s", flush=True)
        report = compress(res.model, out / "scene.locogs")
        dec = decompress(out / "scene.locogs")
        write_3dgs_ply(out / "decoded.ply", dec)
        masked_at_export = len(res.model) - len(dec)
        rows["LocoGS"] = {"train": evaluate(dec, scene.train()), "test": evaluate(dec, test_views, lpips_model),
                          "bytes": report.total_bytes, "n": len(dec), "train_s": res.seconds,
                          "bytes_per_gaussian": report.total_bytes / len(dec),
                          "payload_bytes_per_gaussian": report.bytes_per_gaussian(),
                          "sections": dict(report.sections), "header_bytes": report.header_bytes,
                          "file_size": os.path.getsize(out / "scene.locogs"),
                          "sh_degrees": torch.bincount(dec.sh_degrees, minlength=4).tolist(),
                          "masked_pruned_in_training": res.mask_pruned, "masked_at_export": masked_at_export,
                          "pairs": pair_count(dec, test_views)}  # fmt: skip
        models["LocoGS"] = dec
        images["LocoGS"] = render(dec, test_views[0][0]).image.clamp(0, 1)
    print("timing renders (interleaved) ...", flush=True)
    timing = interleaved_render_times(models, test_views, repeat=args.repeat)
    for name in rows:
        rows[name]["render_s"] = timing[name]
    png = "baseline_test0.png" if args.baseline else "side_by_side_test0.png"
    save_image(out / png, torch.cat([test_views[0][1], *images.values()], dim=1))
    result["methods"] = rows
    result["env"] = {"torch": torch.__version__, "threads": torch.get_num_threads(),
                     "cpu_isa": torch.backends.cpu.get_cpu_capability()}  # fmt: skip
    with atomic_write(out / "results.json", "w") as f:
        json.dump(result, f, indent=1, default=float)
    print_table(rows, ply_bytes, lpips_model is not None)
    print(f"outputs in {out}/ ; total {time.perf_counter() - t0:.0f}s; threads {torch.get_num_threads()}, "
          f"CPU ISA {torch.backends.cpu.get_cpu_capability()}")  # fmt: skip
    return result


def print_table(rows: dict, ply_bytes: int, with_lpips: bool) -> None:
    t_base = rows["3DGS"]["render_s"]["median"]
    print()
    print("| Method | test PSNR | test SSIM | test LPIPS | train PSNR | size (MB) | B/Gaussian | size ratio | Gaussians |"
          " SH degrees 0/1/2/3 | pairs (test views) | render ms (median [min, max]) | render ratio | train s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        te, tr, rs = r["test"], r["train"], r["render_s"]
        lp = f"{te['lpips'][0]:.4f}" if with_lpips and te["lpips"] else "n/a"
        print(f"| {name} | {te['psnr'][0]:.2f} ± {te['psnr'][1]:.2f} | {te['ssim'][0]:.4f} | {lp} | "
              f"{tr['psnr'][0]:.2f} | {r['bytes'] / 1e6:.4f} | {r['bytes_per_gaussian']:.1f} | "
              f"{ply_bytes / r['bytes']:.1f}x | {r['n']} | {'/'.join(map(str, r['sh_degrees']))} | {r['pairs']} | "
              f"{rs['median'] * 1e3:.1f} [{rs['min'] * 1e3:.1f}, {rs['max'] * 1e3:.1f}] | "
              f"{t_base / rs['median']:.2f}x | {r['train_s']:.0f} |")  # fmt: skip
    if "LocoGS" in rows:
        r = rows["LocoGS"]
        print()
        print("LocoGS file sections (bytes): " + ", ".join(f"{k} {v}" for k, v in r["sections"].items())
              + f", header {r['header_bytes']}; total {r['bytes']} = file size {r['file_size']}")  # fmt: skip
        print(f"per-Gaussian payload (all but grid and MLPs): {r['payload_bytes_per_gaussian']:.2f} B/Gaussian; "
              f"Gaussians removed by the mask: {r['masked_pruned_in_training']} during training, "
              f"{r['masked_at_export']} at export")  # fmt: skip
    print(
        "(± = standard deviation over test views; pairs = pixel-Gaussian pairs blended, summed over the test views; one seed)"
    )
