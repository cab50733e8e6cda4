"""Hash-grid encoding forward and forward+backward (LocoGS's 16-level grid): the torch reference, and on a GPU the
Triton kernel, timed interleaved in one run, as a ratio against the reference.

    python packages/locogs/benchmarks/bench_locogs_hashgrid.py [--device cpu|cuda] [--points 20000] [--log2t 19]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from iclr25.locogs import HashGridEncoding
from iclr25.shared import write_result

# scripts/gpu_check.sh: 1M points (about the Gaussian count of a Mip-NeRF 360 scene) on the paper's 2^19 grid
GPU_ARGS = ["--device", "cuda", "--points", "1000000", "--log2t", "19", "--repeat", "5"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--points", type=int, default=20000)
    p.add_argument("--log2t", type=int, default=19)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_locogs_hashgrid.json"))
    a = p.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available")
    enc = HashGridEncoding(log2_hashmap_size=a.log2t).to(device)
    pts = torch.rand(a.points, 3, generator=torch.Generator().manual_seed(0)).to(device)
    backends = ["torch", "triton"] if device == "cuda" else ["torch"]

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def fwd(be):
        enc.backend = be
        with torch.no_grad():
            enc(pts)

    def fwd_bwd(be):
        enc.backend = be
        enc.table.grad = None
        enc(pts).sum().backward()

    fns = {
        f"{be}/{name}": (fn, be) for be in backends for name, fn in (("forward", fwd), ("forward_backward", fwd_bwd))
    }
    times = {k: [] for k in fns}
    for r in range(a.warmup + a.repeat):  # interleaved: every round times every variant once
        for k, (fn, be) in fns.items():
            sync()
            t0 = time.perf_counter()
            fn(be)
            sync()
            if r >= a.warmup:
                times[k].append(time.perf_counter() - t0)
    figures = {k: {"median_ms": statistics.median(v) * 1e3, "min_ms": min(v) * 1e3, "max_ms": max(v) * 1e3}
               for k, v in times.items()}  # fmt: skip
    for k, v in figures.items():
        print(f"{k}: {v['median_ms']:.2f} ms [{v['min_ms']:.2f}, {v['max_ms']:.2f}] for {a.points} points")
    if device == "cuda":
        for name in ("forward", "forward_backward"):
            figures[f"speedup_triton_vs_torch_{name}"] = (
                figures[f"torch/{name}"]["median_ms"] / figures[f"triton/{name}"]["median_ms"]
            )
    params = vars(a) | {"device": device, "threads": torch.get_num_threads(),
                        "cpu_isa": torch.backends.cpu.get_cpu_capability()}  # fmt: skip
    write_result(a.out, {"name": "locogs_hashgrid", "params": params, "figures": figures})
    return figures


if __name__ == "__main__":
    main()
