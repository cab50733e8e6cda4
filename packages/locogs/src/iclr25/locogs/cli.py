"""``python -m iclr25.locogs demo``: 3DGS baseline vs LocoGS on the synthetic scene, paper-style table."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr25.locogs", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train on the built-in synthetic scene and print the comparison table")
    demo.add_argument("--baseline", action="store_true", help="only the 3DGS baseline (part 1 of the method)")
    demo.add_argument("--iterations", type=int, default=150, help="training steps for each method")
    demo.add_argument("--size", type=int, default=32, help="image width and height")
    demo.add_argument("--views", type=int, default=24, help="number of synthetic views (every 8th is a test view)")
    demo.add_argument("--points", type=int, default=1000, help="initial points sampled on the true surfaces")
    demo.add_argument("--log2-hashmap", type=int, default=12, help="hash table size (paper: 19, or 17 small)")
    demo.add_argument("--max-gaussians", type=int, default=3000, help="densification cap (CPU time budget)")
    demo.add_argument("--out", default="locogs_demo", help="output folder (PNGs, PLY, .locogs file)")
    demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
