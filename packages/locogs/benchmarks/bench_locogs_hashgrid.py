"""Hash-grid encoding forward+backward (LocoGS's 16-level, 2^19 grid): the torch reference, and on a GPU the Triton
kernel as a ratio against it measured in the same run.

    python packages/locogs/benchmarks/bench_locogs_hashgrid.py [--points 20000] [--log2t 19]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from iclr25.locogs import HashGridEncoding
from iclr25.shared import benchmark, write_result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=20000)
    p.add_argument("--log2t", type=int, default=19)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_locogs_hashgrid.json"))
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    enc = HashGridEncoding(log2_hashmap_size=a.log2t).to(device)
    pts = torch.rand(a.points, 3, device=device)
    figures = {}
    for be in ["torch", "triton"] if device == "cuda" else ["torch"]:
        enc.backend = be

        def step():
            enc.table.grad = None
            enc(pts).sum().backward()

        s = benchmark(step, warmup=1, repeat=a.repeat)
        figures[f"{be}_forward_backward_ms"] = s.median * 1e3
        print(f"{be}: {s.median * 1e3:.1f} ms for {a.points} points (forward + backward)")
    if device == "cuda":
        figures["speedup"] = figures["torch_forward_backward_ms"] / figures["triton_forward_backward_ms"]
    write_result(a.out, {"name": "locogs_hashgrid", "params": vars(a) | {"device": device}, "figures": figures})
    return figures


if __name__ == "__main__":
    main()
