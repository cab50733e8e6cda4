"""Command line: ``python -m iclr25.qpcert demo [--ntk]`` and ``python -m iclr25.qpcert reproduce --npz PATH``
(the paper's Cora-MLb / Citeseerb protocol on your own copy of the data)."""

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


def _floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from err


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err


def _reproduce(args) -> None:
    import json

    from iclr25.shared import atomic_write

    from .experiments import format_table
    from .reproduce import reproduce_citation, summary_rows

    models = [m.strip() for m in args.models.split(",")] if args.models else None
    n_test = None if args.n_test == 0 else args.n_test
    records = reproduce_citation(args.npz, args.dataset, models, args.seeds, args.deltas, args.n_per_class, n_test,
                                 "all" if args.samplewise_all else "certified", time_limit=args.time_limit,
                                 log=print)  # fmt: skip
    r0 = records[0]
    print(f"\n{args.dataset}b: m = {r0['m']} labelled nodes, collective on {r0['n_certified_nodes']} test nodes, "
          f"seeds {list(args.seeds)}; certified ratio and certified accuracy (correct AND certified) per budget")  # fmt: skip
    print(format_table(summary_rows(records)))
    if args.out:
        with atomic_write(args.out, "w") as fh:
            fh.write(json.dumps(records, indent=1))
        print(f"records: {args.out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr25.qpcert", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the built-in experiments and print paper-style tables")
    demo.add_argument("--ntk", action="store_true", help="part 1: NTK-SVM accuracy per architecture")
    demo.add_argument("--out", default="qpcert_demo", help="folder for the certificate plot and JSON (part 2)")
    rep = sub.add_parser("reproduce", help="the paper's real-data protocol (Cora-MLb / Citeseerb) on your .npz")
    rep.add_argument(
        "--npz", required=True, help="path to your cora_ml.npz / citeseer.npz (adj_matrix.*, attr_matrix.*)"
    )
    rep.add_argument(
        "--dataset", default="cora_ml", choices=("cora_ml", "citeseer"), help="selects the official C table"
    )
    rep.add_argument(
        "--models", default="GCN,SGC,MLP", help="comma-separated, from the official table (default GCN,SGC,MLP)"
    )
    rep.add_argument("--seeds", type=_ints, default=[0, 1, 2, 3, 4], help="data/model seeds (official 0-4)")
    rep.add_argument("--deltas", type=_floats, default=None, help="budgets as fractions (official grid by default)")
    rep.add_argument("--n-per-class", type=int, default=5, help="official 5 (m = 20 labelled nodes)")
    rep.add_argument("--n-test", type=int, default=50, help="certified test nodes (official 50; 0 = all)")
    rep.add_argument(
        "--samplewise-all", action="store_true", help="sample-wise on every test node (official one-node runs)"
    )
    rep.add_argument("--time-limit", type=float, default=60.0, help="per MILP, only if the enumeration is too large")
    rep.add_argument("--out", default=None, help="write the per-seed records as JSON")
    args = parser.parse_args(argv)
    if args.command == "reproduce":
        if args.deltas is None:
            from .reproduce import OFFICIAL_DELTAS

            args.deltas = list(OFFICIAL_DELTAS)
        _reproduce(args)
        return 0
    if args.command == "demo":
        if args.ntk:
            _demo_ntk()
        else:
            from .demo import run_certificate_demo

            run_certificate_demo(args.out)
    return 0
