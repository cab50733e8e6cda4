"""GEMV micro-benchmark: dense F.linear vs TEAL sparse GEMV vs the (1 - s) * dense ideal, s = 0 ... 0.9.

Protocol (official scripts/benchmark_gemv.py): batch 1, x ~ U(-0.5, 0.5), threshold t = s / 2 so the expected
sparsity is exactly s; Llama-sized weights. Baseline = what a user runs otherwise: ``F.linear(x, W)`` on the
row-major ``nn.Linear`` weight (cuBLAS on GPU, oneDNN/MKL on CPU).

CPU timing: one thread, per-call thread-CPU time (robust to time-slicing on a shared machine), medians over
interleaved rounds, weights rotated over >= 320 MiB so every call streams them from DRAM (the 32 MiB L3 would
otherwise hold a 4096 x 4096 matrix). GPU timing: ``triton.testing.do_bench`` medians of CUDA-graph replays (GPU
time without Python overhead; eager timings are recorded too).

    python packages/teal/benchmarks/bench_teal_gemv.py --device cpu --out gemv_cpu.json
    python packages/teal/benchmarks/bench_teal_gemv.py --device cuda --out gemv_gpu.json   # skips without CUDA
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from iclr25.shared import write_result
from iclr25.teal.benchutil import cpu_environment, ratio_summary, summarize
from iclr25.teal.kernels import Int8Weight, prepare_weight, sparse_gemv, sparse_gemv_int8

GPU_ARGS = ["--device", "cuda", "--quick"]
CPU_SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008)]  # [out, in]: q/o, gate/up, down of Llama-2-7B
GPU_SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336)]
LEVELS = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
ROTATE_BYTES = 320 * 2**20


def _thread_time(fn) -> float:
    t = time.thread_time()
    fn()
    return time.thread_time() - t


def cpu_case(shape, dtype, levels, rounds):
    n, k = shape
    g = torch.Generator().manual_seed(0)
    elem = torch.tensor([], dtype=dtype).element_size() if dtype != "int8" else 1
    copies = max(2, -(-ROTATE_BYTES // (n * k * elem)))
    x = (torch.rand(k, generator=g) - 0.5).to(torch.float32 if dtype == "int8" else dtype)
    if dtype == "int8":
        base = [torch.randn(n, k, generator=g) for _ in range(copies)]
        dense_w = [w for w in base]  # fp32 dequantized baseline
        sparse_w = [Int8Weight.quantize(w) for w in base]
        for q in sparse_w:
            _ = q.packed
        del base

        def sparse_call(i, t):
            return sparse_gemv_int8(x, sparse_w[i], t, backend="torch")
    else:
        dense_w = [torch.randn(n, k, generator=g).to(dtype) for _ in range(copies)]
        sparse_w = [prepare_weight(w) for w in dense_w]

        def sparse_call(i, t):
            return sparse_gemv(x, sparse_w[i], t, backend="torch")

    times = {"dense": [], **{s: [] for s in levels}}
    i = 0
    for _ in range(rounds):
        i = (i + 1) % copies
        times["dense"].append(_thread_time(lambda i=i: F.linear(x, dense_w[i])))
        for s in levels:
            i = (i + 1) % copies
            times[s].append(_thread_time(lambda i=i, s=s: sparse_call(i, s / 2)))
    dense_times = times["dense"][1:]  # round 0 is the warm-up
    dense = statistics.median(dense_times)
    rows = []
    for s in levels:
        med = statistics.median(times[s][1:])
        spread = ratio_summary(dense_times, times[s][1:])  # per round: dense time / sparse time
        rows.append({"sparsity": s, "sparse_s": med, "speedup": dense / med, "speedup_per_round": spread,
                     "ideal_speedup": 1 / max(1 - s, 1e-9)})  # fmt: skip
    nbytes = n * k * (elem if dtype != "int8" else 4)
    return {"shape": [n, k], "dtype": str(dtype).replace("torch.", ""), "dense_s": dense,
            "dense_s_summary": summarize(dense_times), "dense_GBps": nbytes / dense / 1e9, "rows": rows}  # fmt: skip


def _graphed(fn):
    """A CUDA graph replaying ``fn`` (times the GPU work without Python/launch overhead)."""
    fn()  # warm-up: also runs the Triton autotuner outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def gpu_case(shape, dtype, levels, quick=False):
    import functools

    from triton.testing import do_bench

    if quick:  # fits the prepared GPU check's per-benchmark budget
        do_bench = functools.partial(do_bench, warmup=10, rep=30)

    n, k = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.rand(k, generator=g, device="cuda") - 0.5).to(dtype)
    w = torch.randn(n, k, generator=g, device="cuda").to(dtype)
    wt = prepare_weight(w)
    dense = do_bench(_graphed(lambda: F.linear(x, w)), return_mode="median") * 1e-3
    dense_eager = do_bench(lambda: F.linear(x, w), return_mode="median") * 1e-3
    rows = []
    for s in levels:
        call = lambda s=s: sparse_gemv(x, wt, s / 2, backend="triton")  # noqa: E731
        med = do_bench(_graphed(call), return_mode="median") * 1e-3
        eager = do_bench(call, return_mode="median") * 1e-3
        rows.append({"sparsity": s, "sparse_s": med, "speedup": dense / med, "ideal_speedup": 1 / max(1 - s, 1e-9),
                     "sparse_eager_s": eager, "speedup_eager": dense_eager / eager})  # fmt: skip
    return {"shape": [n, k], "dtype": str(dtype).replace("torch.", ""), "dense_s": dense, "dense_eager_s": dense_eager,
            "dense_GBps": n * k * w.element_size() / dense / 1e9, "rows": rows}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", default="bench_teal_gemv.json")
    p.add_argument("--quick", action="store_true", help="s in {0, 0.4, 0.5, 0.9}, one shape per role, fewer rounds")
    p.add_argument("--rounds", type=int, default=25)
    args = p.parse_args(argv)
    levels = [0.0, 0.4, 0.5, 0.9] if args.quick else LEVELS
    if args.rounds < 2:
        p.error("--rounds must be >= 2 (round 0 is a warm-up)")
    cases = []
    params = {"device": args.device, "levels": levels, "protocol": "x~U(-.5,.5), t=s/2, batch 1"}
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("no CUDA device: GPU GEMV benchmark skipped")
            return 0
        for dtype in (torch.float16, torch.bfloat16):
            for shape in GPU_SHAPES[:2] if args.quick else GPU_SHAPES:
                cases.append(gpu_case(shape, dtype, levels, quick=args.quick))
                print(_fmt(cases[-1]), flush=True)
    else:
        torch.set_num_threads(1)
        params.update(cpu_environment())
        params.update({"rounds": args.rounds, "warmup_rounds": 1, "interleaved": True, "clock": "thread_time"})
        shapes = CPU_SHAPES[1:2] if args.quick else CPU_SHAPES
        for dtype in (torch.float32, torch.bfloat16, torch.float16, "int8"):
            for shape in shapes:
                cases.append(cpu_case(shape, dtype, levels, max(5, args.rounds // (2 if args.quick else 1))))
                print(_fmt(cases[-1]), flush=True)
    write_result(args.out, {"name": "teal_gemv", "params": params, "figures": {"cases": cases}})
    print(f"wrote {args.out}")
    return 0


def _fmt(case) -> str:
    def one(r):
        q = r.get("speedup_per_round")
        return f"{r['sparsity']:.1f}:{r['speedup']:.2f}x" + (f"[{q['min']:.2f}-{q['max']:.2f}]" if q else "")

    sp = " ".join(one(r) for r in case["rows"])
    return (f"{case['dtype']:>8} {case['shape'][0]}x{case['shape'][1]} dense {case['dense_s'] * 1e3:.3f} ms "
            f"({case['dense_GBps']:.1f} GB/s) | sparse speed-up {sp}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
