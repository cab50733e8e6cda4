"""``python -m iclr25.locogs demo``: 3DGS baseline vs LocoGS on the synthetic scene, paper-style table."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr25.locogs", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train on the built-in synthetic scene and print the comparison table")
    demo.add_argument("--baseline", action="store_true", help="only the 3DGS baseline (part 1 of the method)")
    demo.add_argument("--full", action="store_true",
                      help="the larger run of the README (32 views at 128x128, 20k initial points, 500 steps, "
                      "up to 30k Gaussians; about an hour on 2 CPU cores)")  # fmt: skip
    demo.add_argument("--iterations", type=int, default=None, help="training steps for each method (default 300)")
    demo.add_argument("--size", type=int, default=None, help="image width and height (default 32)")
    demo.add_argument("--views", type=int, default=None, help="synthetic views, every 8th is a test view (default 24)")
    demo.add_argument("--points", type=int, default=None, help="initial points on the true surfaces (default 1000)")
    demo.add_argument("--log2-hashmap", type=int, default=None, help="hash table size (default 12; paper: 19, 17 small)")
    demo.add_argument("--max-gaussians", type=int, default=None, help="densification cap (default 3000)")
    demo.add_argument("--repeat", type=int, default=5, help="interleaved render-timing repeats")
    demo.add_argument("--lpips-weights", default=None, help="LPIPS-VGG state dict (nothing is downloaded)")
    demo.add_argument("--resume", action="store_true", help="continue from the checkpoints in --out")
    demo.add_argument("--out", default="locogs_demo", help="output folder (PNGs, PLY, .locogs file, results.json)")
    demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
