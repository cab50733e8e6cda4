"""Command line: ``python -m iclr25.qpcert demo [--ntk]``."""

from __future__ import annotations

import argparse
import time


def _demo_ntk() -> None:
    from .experiments import format_table, ntk_accuracy_table

    t0 = time.perf_counter()
    rows = ntk_accuracy_table()
    print("NTK-SVM test accuracy (bias-free kernel SVM on the closed-form NTK; CSBM n=200 m=40, karate m=8)")
    print(format_table([{k: v for k, v in r.items() if not k.startswith("kkt")} for r in rows]))
    worst = max(v for r in rows for k, v in r.items() if k.startswith("kkt"))
    print(f"largest KKT residual of any SVM solve: {worst:.2e}   ({time.perf_counter() - t0:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr25.qpcert", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the built-in experiments and print paper-style tables")
    demo.add_argument("--ntk", action="store_true", help="part 1: NTK-SVM accuracy per architecture")
    demo.add_argument("--out", default="qpcert_demo", help="folder for the certificate plot and JSON (part 2)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.ntk:
            _demo_ntk()
        else:
            from .demo import run_certificate_demo

            run_certificate_demo(args.out)
    return 0
