"""Command line: ``python -m iclr25.delta {demo,train,export,eval}``."""

from __future__ import annotations

import argparse
import json
import sys

import torch


def _config(name: str):
    from .config import DeltaConfig

    presets = {"paper": DeltaConfig.paper, "tiny": DeltaConfig.tiny, "micro": DeltaConfig.micro}
    if name not in presets:
        raise SystemExit(f"unknown config {name!r}; choose from {sorted(presets)}")
    return presets[name]()


def cmd_train(args) -> int:
    from .model import DeltaModel
    from .train import TrainConfig, train

    torch.manual_seed(args.seed)
    cfg = _config(args.config).replace(zero_init_head=args.zero_init_head, dense_depth=args.dense_depth)
    model = DeltaModel(cfg)
    if args.init:  # e.g. start the 3D stage from a 2D-pretrained checkpoint
        from .checkpoint import load_checkpoint

        model.load_state_dict(load_checkpoint(args.init).state_dict())
    tcfg = TrainConfig(
        steps=args.steps, lr=args.lr, stage=args.stage, num_frames=args.frames, height=args.size, width=args.size,
        num_sparse=args.num_sparse, num_clips=args.num_clips, seed=args.seed, checkpoint=args.checkpoint,
        checkpoint_every=args.checkpoint_every, stop_after=args.stop_after,
    )  # fmt: skip
    hist = train(model, tcfg, show_progress=not args.quiet)
    first, last = hist[0], hist[-1]
    print(json.dumps({"steps": len(hist), "first_loss": first["loss"], "last_loss": last["loss"]}))
    return 0


def cmd_export(args) -> int:
    from .train import export_training_state

    print(json.dumps(export_training_state(args.state, args.out, dense_depth=args.dense_depth), indent=2))
    return 0


def cmd_eval(args) -> int:
    from .evaluate import evaluate_dataset

    res = evaluate_dataset(args.dataset, args.path, args.checkpoint, limit=args.limit, iters=args.iters)
    print(json.dumps(res, indent=2))
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    summary = run_demo(
        num_clips=args.clips, train_steps=args.train_steps, out_png=args.png, seed=args.seed, threads=args.threads,
        checkpoint=args.checkpoint, sparse_timing=not args.no_sparse_timing, size=args.size,
    )  # fmt: skip
    if args.out:
        from iclr25.shared import atomic_write

        with atomic_write(args.out, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m iclr25.delta", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser(
        "demo", help="synthetic-video table: DELTA vs zero motion vs flow chaining, dense vs sparse time"
    )
    d.add_argument("--clips", type=int, default=20)
    d.add_argument(
        "--checkpoint",
        default=None,
        help="model to evaluate (default: the shipped micro checkpoint; without it, an untrained model, and the demo says so)",
    )
    d.add_argument("--no-sparse-timing", action="store_true", help="skip the dense vs per-pixel timing")
    d.add_argument("--out", default=None, help="write the summary as JSON")
    d.add_argument(
        "--train-steps", type=int, default=0, help="training steps on the synthetic stream before evaluating"
    )
    d.add_argument("--png", default="delta_demo_tracks.png")
    d.add_argument("--seed", type=int, default=900_000, help="clip seeds (training uses seed*100003+step)")
    d.add_argument("--threads", type=int, default=None)
    d.add_argument("--size", type=int, default=None, help="clip size (default: the model's training resolution)")
    t = sub.add_parser("train", help="train on synthetic clips with exact ground truth")
    t.add_argument("--config", default="micro", help="paper | tiny | micro")
    t.add_argument("--steps", type=int, default=200)
    t.add_argument("--lr", type=float, default=1e-4)
    t.add_argument("--stage", default="3d", choices=["2d", "3d"])
    t.add_argument("--frames", type=int, default=8)
    t.add_argument("--size", type=int, default=32)
    t.add_argument("--num-sparse", type=int, default=32)
    t.add_argument("--num-clips", type=int, default=None)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--zero-init-head", action="store_true")
    t.add_argument(
        "--dense-depth", default="absolute", choices=["absolute", "log_ratio"],
        help="dense depth upsampling: absolute (official) or log_ratio (log d_t/d_0 times the full-resolution input depth)",
    )  # fmt: skip
    t.add_argument("--init", default=None, help="initial weights (e.g. the 2D-pretraining result for --stage 3d)")
    t.add_argument("--checkpoint", default=None, help="training state file (written every --checkpoint-every steps)")
    t.add_argument("--checkpoint-every", type=int, default=50)
    t.add_argument(
        "--stop-after", type=int, default=None, help="stop after N steps of the --steps schedule (resumable)"
    )
    t.add_argument("--quiet", action="store_true")
    x = sub.add_parser("export", help="write a training state's model as a plain checkpoint (no optimizer)")
    x.add_argument("state", help="training state file (train --checkpoint)")
    x.add_argument("out", help="checkpoint to write")
    x.add_argument(
        "--dense-depth", default=None, choices=["absolute", "log_ratio"],
        help="dense-depth mode of the exported model (default: the one it was trained with)",
    )  # fmt: skip
    e = sub.add_parser("eval", help="evaluate a checkpoint on your copy of a benchmark")
    e.add_argument("--dataset", required=True, choices=["tapvid3d", "kubric", "cvo"])
    e.add_argument("--path", required=True)
    e.add_argument(
        "--checkpoint", required=True, help="checkpoint to evaluate (required): ours or an official DELTA state dict"
    )
    e.add_argument("--limit", type=int, default=None)
    e.add_argument("--iters", type=int, default=None)
    args = p.parse_args(argv)
    return {"demo": cmd_demo, "train": cmd_train, "eval": cmd_eval, "export": cmd_export}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
