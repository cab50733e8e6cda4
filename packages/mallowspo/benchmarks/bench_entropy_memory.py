"""Peak memory (and time) of the per-token entropy + label log-prob over a large vocabulary:
naive torch (log_softmax, exp, product: several float32 [N, V] copies) vs chunked torch vs the fused Triton kernel.

CPU: every measurement runs in a fresh subprocess, the variants interleaved over ``--repeats`` rounds (median and
min/max reported). In the child the logits are generated in place (no logits-sized temporary), the code path is
warmed on a 2-row input, then the kernel's peak-RSS high-water mark is reset (``/proc/self/clear_refs``, Linux) so
the figure is the peak RSS *during the call* minus the RSS just before it. Where the reset is not available the
child falls back to ``ru_maxrss`` and says so (``peak_method``). The Triton kernel runs under the interpreter on
CPU: its speed is meaningless and it is measured ``--fused-repeats`` times (default 1; its memory is a few floats
per row). CUDA (used automatically when available; ``--cpu`` forces the CPU variant): torch.cuda.max_memory_allocated
above the logits, and timings with iclr25.shared.benchmark, also for TRL's chunked ``entropy_from_logits`` when TRL
is installed.

    python packages/mallowspo/benchmarks/bench_entropy_memory.py --rows 1024 --vocab 32768 --out results/entropy.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

METHODS = ("naive", "chunked", "fused")
CHUNK_ROWS = 256  # rows per chunk of the chunked torch path on CPU


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return _status_kib("VmHWM") is not None


def _child(method: str, rows: int, vocab: int, dtype: str, threads: int) -> dict:
    import gc
    import resource
    import time

    if method == "fused":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    from iclr25.mallowspo.dispersion import token_entropy
    from iclr25.mallowspo.kernels import fused_logp_entropy_reference, logp_entropy

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    logits = torch.empty(rows, vocab, dtype=getattr(torch, dtype))
    logits.normal_(generator=gen).mul_(2.0)  # in place: no logits-sized temporary before the baseline
    labels = torch.randint(0, vocab, (rows,), generator=gen)
    # warm the code paths on a tiny input so their one-off allocations are not counted
    if method == "fused":
        logp_entropy(logits[:2], labels[:2], backend="triton")
    elif method == "chunked":
        token_entropy(logits[:2], chunk_size=CHUNK_ROWS)
    else:
        fused_logp_entropy_reference(logits[:2], labels[:2])
    gc.collect()
    exact = _reset_peak()
    base_kib = _status_kib("VmRSS") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if method == "naive":
        out = fused_logp_entropy_reference(logits, labels)[1]
    elif method == "chunked":
        out = token_entropy(logits, chunk_size=CHUNK_ROWS)
    else:
        out = logp_entropy(logits, labels, backend="triton")[1]
    dt = time.perf_counter() - t0
    peak_kib = _status_kib("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "extra_peak_mib": max(0, peak_kib - base_kib) / 1024.0,
        "seconds": dt,
        "checksum": float(out.double().sum()),
        "peak_method": "VmHWM after clear_refs" if exact else "ru_maxrss (high-water mark of the whole process)",
    }


def _summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def _gpu(rows: int, vocab: int, dtype: str) -> dict:
    import torch

    from iclr25.mallowspo.dispersion import token_entropy
    from iclr25.mallowspo.kernels import fused_logp_entropy_reference, logp_entropy
    from iclr25.shared import benchmark

    logits = (torch.randn(rows, vocab, device="cuda") * 2).to(getattr(torch, dtype))
    labels = torch.randint(0, vocab, (rows,), device="cuda")
    fns = {
        "naive": lambda: fused_logp_entropy_reference(logits, labels),
        "chunked": lambda: token_entropy(logits, chunk_size=1024),
        "fused": lambda: logp_entropy(logits, labels, backend="triton"),
    }
    try:
        from trl.trainer.utils import entropy_from_logits

        fns["trl_chunked"] = lambda: entropy_from_logits(logits, chunk_size=128)
    except ImportError:
        pass
    out = {}
    for name, fn in fns.items():
        fn()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        extra = (torch.cuda.max_memory_allocated() - before) / 2**20
        stats = benchmark(fn, warmup=2, repeat=5)
        out[name] = {"extra_peak_mib": extra, "seconds": stats.median}
    ref = fused_logp_entropy_reference(logits, labels)[1]
    fused = logp_entropy(logits, labels, backend="triton")[1]
    out["max_abs_err_fused_vs_naive"] = float((ref - fused).abs().max())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=None, help="default: 1024 on CPU, 8192 on CUDA")
    ap.add_argument("--vocab", type=int, default=None, help="default: 32768 on CPU, 128256 (Llama-3) on CUDA")
    ap.add_argument("--dtype", default=None, help="default: float32 on CPU, bfloat16 on CUDA")
    ap.add_argument("--repeats", type=int, default=3, help="CPU: fresh-process rounds for naive and chunked")
    ap.add_argument("--fused-repeats", type=int, default=1, help="CPU: rounds for the (interpreted) Triton kernel")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="results/mallowspo_entropy_memory.json")
    ap.add_argument("--child", choices=METHODS)
    ap.add_argument("--cpu", action="store_true", help="force the CPU variant even when CUDA is available")
    args = ap.parse_args()
    if args.repeats < 1 or args.fused_repeats < 0:
        ap.error("--repeats must be >= 1 and --fused-repeats >= 0")
    import torch

    use_gpu = torch.cuda.is_available() and not args.cpu and not args.child
    args.rows = args.rows or (8192 if use_gpu else 1024)
    args.vocab = args.vocab or (128256 if use_gpu else 32768)
    args.dtype = args.dtype or ("bfloat16" if use_gpu else "float32")
    if args.child:
        print(json.dumps(_child(args.child, args.rows, args.vocab, args.dtype, args.threads)))
        return
    from iclr25.shared import write_result

    if use_gpu:
        figures = _gpu(args.rows, args.vocab, args.dtype)
        device = "cuda"
    else:
        runs: dict[str, list[dict]] = {m: [] for m in METHODS}
        for r in range(max(args.repeats, args.fused_repeats)):  # interleaved: naive, chunked, fused, naive, ...
            for m in METHODS:
                if r >= (args.fused_repeats if m == "fused" else args.repeats):
                    continue
                cmd = [sys.executable, __file__, "--child", m, "--rows", str(args.rows), "--vocab", str(args.vocab)]
                cmd += ["--dtype", args.dtype, "--threads", str(args.threads)]
                res = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ})
                runs[m].append(json.loads(res.stdout.strip().splitlines()[-1]))
        figures = {}
        for m, rs in runs.items():
            if not rs:
                continue
            figures[m] = {
                "extra_peak_mib": _summary([x["extra_peak_mib"] for x in rs]),
                "seconds": _summary([x["seconds"] for x in rs]),
                "checksum": rs[0]["checksum"],
                "peak_method": rs[0]["peak_method"],
            }
        device = "cpu"
    logits_mib = args.rows * args.vocab * (2 if args.dtype in ("bfloat16", "float16") else 4) / 2**20
    figures["logits_mib"] = logits_mib

    def extra(m):
        v = figures.get(m, {}).get("extra_peak_mib")
        return v["median"] if isinstance(v, dict) else v

    for m in ("chunked", "fused"):
        # a ratio only when the denominator is measurable (< 1 MiB of growth reads as "none")
        denom = extra(m)
        figures[f"memory_ratio_naive_over_{m}"] = extra("naive") / denom if denom is not None and denom >= 1 else None
    record = {
        "name": "mallowspo_entropy_memory",
        "params": {
            "rows": args.rows,
            "vocab": args.vocab,
            "dtype": args.dtype,
            "device": device,
            "repeats": args.repeats,
            "fused_repeats": args.fused_repeats,
            "chunk_rows": CHUNK_ROWS,
            "threads": args.threads,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        },
        "figures": figures,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out, record)
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
