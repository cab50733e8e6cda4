"""``python -m iclr25.locogs``: the 3DGS-vs-LocoGS demo, and train / render / eval on your own COLMAP or Blender
scene.

    python -m iclr25.locogs demo [--full]
    python -m iclr25.locogs train --scene DATA [--method locogs|3dgs] [--iterations N] --out RUN
    python -m iclr25.locogs render --model RUN/scene.locogs --scene DATA --out RUN/renders
    python -m iclr25.locogs eval --model RUN/scene.locogs --scene DATA [--lpips-weights vgg.pth]

A scene folder is a COLMAP dataset (``sparse/0`` or ``sparse`` with cameras/images/points3D as .bin or .txt, and an
image folder, every 8th image a test view) or a Blender / NeRF-synthetic dataset (``transforms_train.json`` and
``transforms_test.json``). A model is a ``.locogs`` file (LocoGS) or a 3DGS ``.ply``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _add_demo(sub) -> None:
    demo = sub.add_parser("demo", help="train on the built-in synthetic scene and print the comparison table")
    demo.add_argument("--baseline", action="store_true", help="only the 3DGS baseline (part 1 of the method)")
    demo.add_argument("--full", action="store_true",
                      help="the larger run of the README (32 views at 128x128, 20k initial points, 100 steps, "
                      "up to 25k Gaussians; two stages that can run in parallel, see --stage)")  # fmt: skip
    demo.add_argument("--iterations", type=int, default=None, help="training steps for each method (default 150)")
    demo.add_argument("--size", type=int, default=None, help="image width and height (default 32)")
    demo.add_argument("--views", type=int, default=None, help="synthetic views, every 8th is a test view (default 24)")
    demo.add_argument("--points", type=int, default=None, help="initial points on the true surfaces (default 1000)")
    demo.add_argument(
        "--log2-hashmap", type=int, default=None, help="hash table size (default 12; paper: 19, 17 small)"
    )
    demo.add_argument("--max-gaussians", type=int, default=None, help="densification cap (default 3000)")
    demo.add_argument("--repeat", type=int, default=5, help="interleaved render-timing repeats")
    demo.add_argument("--lpips-weights", default=None, help="LPIPS-VGG state dict (nothing is downloaded)")
    demo.add_argument("--resume", action="store_true", help="continue from the checkpoints in --out")
    demo.add_argument("--stage", choices=("all", "3dgs", "locogs"), default="all",
                      help="'3dgs' / 'locogs': only train that method (checkpointed), e.g. both in parallel; then "
                      "run again with --resume to evaluate")  # fmt: skip
    demo.add_argument("--out", default="locogs_demo", help="output folder (PNGs, PLY, .locogs file, results.json)")
    demo.add_argument("--seed", type=int, default=0)


def _add_scene_args(p, split_default: str) -> None:
    p.add_argument("--scene", required=True, help="COLMAP or Blender dataset folder")
    p.add_argument("--format", choices=("auto", "colmap", "blender"), default="auto")
    p.add_argument("--images", default="images", help="COLMAP image folder inside --scene (e.g. images_4)")
    p.add_argument("--split", choices=("train", "test", "all"), default=split_default)
    p.add_argument("--points", default=None,
                   help="Blender scenes: initial point cloud (PLY / NPY / NPZ); default 3DGS's 100k random points")  # fmt: skip


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m iclr25.locogs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    tr = sub.add_parser("train", help="train LocoGS (-> .locogs file) or 3DGS (-> .ply) on a COLMAP / Blender scene")
    _add_scene_args(tr, "train")
    tr.add_argument("--method", choices=("locogs", "3dgs"), default="locogs")
    tr.add_argument("--preset", choices=("locogs", "small", "colmap"), default="locogs",
                    help="LocoGS preset: 'locogs' (log2 T 19), 'small' (17, lambda_mask 0.005), 'colmap' (0.001)")  # fmt: skip
    tr.add_argument("--iterations", type=int, default=30000, help="steps (the official 30k schedule is compressed)")
    tr.add_argument("--log2-hashmap", type=int, default=None, help="override the preset's hash table size")
    tr.add_argument("--pcd", default=None, help="initial point cloud (PLY / NPY / NPZ; dense init) for LocoGS")
    tr.add_argument("--max-gaussians", type=int, default=None, help="densification cap (default: none in practice)")
    tr.add_argument("--device", default="cpu")
    tr.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--out", required=True, help="run folder: checkpoint, scene.locogs or model.ply, train.json")
    for name, helptext in (("render", "render a model from the scene's cameras to PNGs"),
                           ("eval", "PSNR / SSIM (/ LPIPS) of a model on the scene's views, as JSON")):  # fmt: skip
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--model", required=True, help=".locogs file or 3DGS .ply")
        _add_scene_args(p, "test")
        p.add_argument("--device", default="cpu")
        p.add_argument("--footprint", choices=("square", "tile"), default="square",
                       help="'tile': graphdeco / gsplat whole-tile footprint")  # fmt: skip
        if name == "render":
            p.add_argument("--out", required=True, help="folder for the PNGs")
        else:
            p.add_argument("--lpips-weights", default=None, help="LPIPS-VGG state dict (nothing is downloaded)")
            p.add_argument("--out", default=None, help="write the metrics JSON here")
    return parser


def load_scene(path, fmt: str = "auto", images: str = "images", points=None):
    """A COLMAP or Blender scene from ``path`` (``fmt="auto"`` looks for transforms_train.json, then sparse/)."""
    from .data.blender import load_blender_scene
    from .data.colmap import load_colmap_scene

    root = Path(path)
    if not root.is_dir():
        raise SystemExit(f"--scene {root}: not a folder")
    if fmt == "auto":
        if (root / "transforms_train.json").exists():
            fmt = "blender"
        elif (root / "sparse").is_dir():
            fmt = "colmap"
        else:
            raise SystemExit(f"--scene {root}: neither a Blender dataset (transforms_train.json) nor a COLMAP one "
                             "(sparse/0 or sparse/ with cameras, images, points3D)")  # fmt: skip
    if fmt == "blender":
        return load_blender_scene(root, points_path=points)
    return load_colmap_scene(root, images_dir=images)


def load_model(path):
    """A ``GaussianSet`` from a ``.locogs`` file (decoded) or a 3DGS ``.ply``."""
    from .codec import decompress
    from .data.ply import read_3dgs_ply

    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"--model {p}: no such file")
    if p.suffix == ".locogs":
        return decompress(p)
    if p.suffix == ".ply":
        return read_3dgs_ply(p)
    raise SystemExit(f"--model {p}: expected a .locogs file or a 3DGS .ply, got {p.suffix or 'no suffix'!r}")


def _views(scene, split):
    if split == "all":
        return scene.train() + scene.test()
    views = scene.train() if split == "train" else scene.test()
    if not views:
        raise SystemExit(f"the scene has no {split} views (use --split train or all)")
    return views


def cmd_train(args) -> dict:
    import dataclasses
    import os

    from .codec import compress
    from .config import FieldConfig, Train3DGSConfig, locogs_preset
    from .data.ply import write_3dgs_ply
    from .train3dgs import train_3dgs
    from .train_locogs import train_locogs

    scene = load_scene(args.scene, args.format, args.images, args.points)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cap = {} if args.max_gaussians is None else {"max_gaussians": args.max_gaussians}
    print(f"scene {args.scene}: {len(scene.train_idx)} train / {len(scene.test_idx)} test views, "
          f"{len(scene.points)} initial points; {args.method}, {args.iterations} steps", flush=True)  # fmt: skip
    if args.method == "3dgs":
        cfg = Train3DGSConfig(seed=args.seed, **cap).scaled(args.iterations)
        res = train_3dgs(scene, cfg, checkpoint_path=out / "3dgs.ckpt", checkpoint_every=max(1, args.iterations // 10),
                         resume=args.resume, device=args.device)  # fmt: skip
        model_path = out / "model.ply"
        write_3dgs_ply(model_path, res.gaussians)
        info = {"n_gaussians": len(res.gaussians)}
    else:
        cfg = locogs_preset(args.preset)
        if args.log2_hashmap is not None:
            cfg = dataclasses.replace(cfg, field=FieldConfig(log2_hashmap_size=args.log2_hashmap))
        cfg = dataclasses.replace(cfg, seed=args.seed, **cap).scaled(args.iterations)
        res = train_locogs(scene, cfg, pcd_path=args.pcd, checkpoint_path=out / "locogs.ckpt",
                           checkpoint_every=max(1, args.iterations // 10), resume=args.resume,
                           device=args.device)  # fmt: skip
        model_path = out / "scene.locogs"
        report = compress(res.model, model_path)
        info = {"n_gaussians": report.n_gaussians, "sections": dict(report.sections), "mask_pruned": res.mask_pruned}
    info |= {"method": args.method, "iterations": args.iterations, "train_s": res.seconds, "model": str(model_path),
             "bytes": os.path.getsize(model_path)}  # fmt: skip
    (out / "train.json").write_text(json.dumps(info, indent=1))
    print(f"trained in {res.seconds:.0f}s: {info['n_gaussians']} Gaussians, {model_path} ({info['bytes']} bytes)")
    return info


def _cfg(args):
    from .config import RasterConfig

    return RasterConfig(footprint=args.footprint)


def cmd_render(args) -> list[str]:
    import torch

    from .data.scene import save_image
    from .renderer import render

    g = load_model(args.model).to(args.device)
    scene = load_scene(args.scene, args.format, args.images, args.points)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with torch.no_grad():
        for i, (cam, _) in enumerate(_views(scene, args.split)):
            img = render(g, cam, cfg=_cfg(args)).image.clamp(0, 1)
            name = out / f"{i:04d}_{Path(cam.name or 'view').stem}.png"
            save_image(name, img)
            written.append(str(name))
    print(f"rendered {len(written)} views to {out}/")
    return written


def cmd_eval(args) -> dict:
    import statistics

    import torch

    from .metrics import LPIPS, psnr, ssim
    from .renderer import render

    g = load_model(args.model).to(args.device)
    scene = load_scene(args.scene, args.format, args.images, args.points)
    lp_model = LPIPS().load_weights(args.lpips_weights) if args.lpips_weights else None
    per_view = []
    with torch.no_grad():
        for cam, gt in _views(scene, args.split):
            img = render(g, cam, cfg=_cfg(args)).image.clamp(0, 1)
            gt = gt.to(img.device)
            row = {"view": cam.name, "psnr": psnr(img, gt), "ssim": float(ssim(img, gt))}
            if lp_model is not None:
                row["lpips"] = float(lp_model(img, gt).mean())
            per_view.append(row)
    keys = [k for k in ("psnr", "ssim", "lpips") if k in per_view[0]]
    result = {"model": str(args.model), "split": args.split, "n_views": len(per_view), "n_gaussians": len(g),
              **{k: statistics.fmean(r[k] for r in per_view) for k in keys}, "per_view": per_view}  # fmt: skip
    print(f"{args.split}: {len(per_view)} views, " + ", ".join(f"{k.upper()} {result[k]:.4f}" for k in keys))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return result


def main(argv=None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo(args)
    elif args.command == "train":
        if args.iterations < 1:
            raise SystemExit(f"--iterations must be >= 1, got {args.iterations}")
        cmd_train(args)
    elif args.command == "render":
        cmd_render(args)
    else:
        cmd_eval(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
