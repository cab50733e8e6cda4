"""The demo behind ``python -m iclr25.locogs demo``: 3DGS baseline vs LocoGS on the synthetic scene."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from .codec import compress, decompress
from .config import FieldConfig, LocoGSConfig, Train3DGSConfig
from .data.ply import write_3dgs_ply
from .data.scene import save_image
from .data.synthetic import make_synthetic_scene
from .metrics import measure_render_time, psnr, ssim
from .renderer import render
from .train3dgs import train_3dgs
from .train_locogs import train_locogs


def evaluate(gaussians, views) -> tuple[float, float]:
    ps, ss = [], []
    with torch.no_grad():
        for cam, gt in views:
            img = render(gaussians, cam).image.clamp(0, 1)
            ps.append(psnr(img, gt))
            ss.append(float(ssim(img, gt)))
    return sum(ps) / len(ps), sum(ss) / len(ss)


def render_seconds(gaussians, cam) -> float:
    with torch.no_grad():
        return measure_render_time(lambda: render(gaussians, cam), warmup=1, repeat=5)


def run_demo(args) -> dict:
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    scene = make_synthetic_scene(n_views=args.views, width=args.size, height=args.size, n_points=args.points,
                                 seed=args.seed)  # fmt: skip
    print(f"synthetic scene: {len(scene.train_idx)} train / {len(scene.test_idx)} test views at "
          f"{args.size}x{args.size}, {len(scene.points)} initial points ({time.perf_counter() - t0:.1f}s)")  # fmt: skip
    test_cam, test_gt = scene.test()[0]
    rows = []

    base = train_3dgs(
        scene,
        Train3DGSConfig(seed=args.seed, max_gaussians=args.max_gaussians),
        iterations=args.iterations,
        progress_bar=True,
    )
    g3 = base.gaussians
    print(f"3DGS trained: {len(g3)} Gaussians in {base.seconds:.0f}s", flush=True)
    write_3dgs_ply(out / "baseline.ply", g3)
    ply_bytes = os.path.getsize(out / "baseline.ply")
    tr, te = evaluate(g3, scene.train()), evaluate(g3, scene.test())
    t_base = render_seconds(g3, test_cam)
    img_base = render(g3, test_cam).image.clamp(0, 1)
    rows.append(("3DGS", tr, te, ply_bytes, len(g3), t_base, base.seconds))
    if args.baseline:
        save_image(out / "baseline_test0.png", torch.cat([test_gt, img_base], dim=1))
    else:
        fc = FieldConfig(log2_hashmap_size=args.log2_hashmap)
        res = train_locogs(
            scene, LocoGSConfig(field=fc, seed=args.seed, max_gaussians=args.max_gaussians), iterations=args.iterations
        )
        print(f"LocoGS trained: {len(res.model)} Gaussians in {res.seconds:.0f}s", flush=True)
        report = compress(res.model, out / "scene.locogs")
        dec = decompress(out / "scene.locogs")
        write_3dgs_ply(out / "decoded.ply", dec)
        tr2, te2 = evaluate(dec, scene.train()), evaluate(dec, scene.test())
        t_loco = render_seconds(dec, test_cam)
        img_loco = render(dec, test_cam).image.clamp(0, 1)
        rows.append(("LocoGS", tr2, te2, report.total_bytes, len(dec), t_loco, res.seconds))
        save_image(out / "side_by_side_test0.png", torch.cat([test_gt, img_base, img_loco], dim=1))
    print()
    print("| Method | train PSNR | test PSNR | test SSIM | size (MB) | size ratio | Gaussians | render ms | "
          "render ratio | train s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, tr_, te_, size, n, t, secs in rows:
        print(f"| {name} | {tr_[0]:.2f} | {te_[0]:.2f} | {te_[1]:.4f} | {size / 1e6:.4f} | "
              f"{ply_bytes / size:.1f}x | {n} | {t * 1e3:.1f} | {t_base / t:.2f}x | {secs:.0f} |")  # fmt: skip
    if not args.baseline:
        print()
        print("LocoGS file sections (bytes): " + ", ".join(f"{k} {v}" for k, v in report.sections.items())
              + f", header {report.header_bytes}; total {report.total_bytes} = file size "
              f"{os.path.getsize(out / 'scene.locogs')}")  # fmt: skip
        print(f"per-Gaussian payload (all but grid and MLPs): {report.bytes_per_gaussian():.2f} B/Gaussian; "
              f"SH degrees of decoded Gaussians: {torch.bincount(dec.sh_degrees, minlength=4).tolist()}")  # fmt: skip
    print(f"outputs in {out}/ ; total {time.perf_counter() - t0:.0f}s")
    return {"rows": rows}
