"""Per-node certificate time vs labelled nodes m and budget k, for every exact path and MILP backend/formulation.

Baseline: the paper's formulation ("official", m^2 product variables) on the same open solver; ratio = official /
compact time for HiGHS. All paths are checked to agree before timings are recorded.

    PYTHONPATH=packages/shared/src:packages/qpcert/src python packages/qpcert/benchmarks/bench_certify.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from iclr25.qpcert import certify_label_flips, make_csbm, ntk_matrix
from iclr25.qpcert.milp import available_solvers
from iclr25.shared import write_result


def instance(m_per_class: int, n: int = 80, t: int = 4, seed: int = 0):
    g = make_csbm(n, seed=seed, K=3.0)
    q = ntk_matrix(g.adjacency, g.features, arch="gcn")
    rng = np.random.default_rng(seed)
    tr = np.concatenate([rng.choice(np.flatnonzero(g.labels == c), m_per_class, replace=False) for c in (0, 1)])
    te = np.setdiff1d(np.arange(n), tr)[::7][:t]
    return q, g.labels, tr, te


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).with_name("results") / "bench_certify.json"))
    ap.add_argument("--sizes", default="5,8", help="labelled nodes per class")
    ap.add_argument("--budgets", default="1,2")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args(argv)
    c = 0.5
    figures, rows = {}, []
    solvers = [s for s in ("highs", "scip", "scipy") if s in available_solvers()]
    for per_class in (int(s) for s in args.sizes.split(",")):
        q, y, tr, te = instance(per_class)
        m = len(tr)
        for k in (int(b) for b in args.budgets.split(",")):
            ref, t_enum = timed(certify_label_flips, q, y, tr, te, k, c, method="enumerate")
            row = {"m": m, "k": k, "enumerate": t_enum / len(te)}
            for solver in solvers:
                for form in ("compact", "official"):
                    if solver != "highs" and form == "official":
                        continue
                    res, sec = timed(certify_label_flips, q, y, tr, te, k, c, method="milp", solver=solver, formulation=form, exact_margin=True, time_limit=args.time_limit)  # fmt: skip
                    agree = res.status == ref.status
                    row[f"{solver}-{form}"] = sec / len(te)
                    row[f"{solver}-{form}-agrees"] = agree
            decision, sec = timed(certify_label_flips, q, y, tr, te, k, c, method="milp")
            row["highs-compact-decision"] = sec / len(te)
            small_c = 0.9 / float(q[np.ix_(tr, tr)].abs().sum(1).max())
            _, sec = timed(certify_label_flips, q, y, tr, te, k, small_c, method="sort")
            row["sort (C in all-alpha=C regime)"] = sec / len(te)
            rows.append(row)
            print(row)
            key = f"m{m}_k{k}"
            figures[f"{key}_official_over_compact_highs"] = row["highs-official"] / row["highs-compact"]
            figures[f"{key}_milp_over_enumeration"] = row["highs-compact"] / row["enumerate"]
    record = {"name": "qpcert_certificate_paths", "params": {"C": c, "per_node_seconds": rows}, "figures": figures}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out, record)
    print(figures)
    return record


if __name__ == "__main__":
    main()
