"""Peak memory (and time) of the per-token entropy + label log-prob over a large vocabulary:
naive torch (log_softmax, exp, product: several float32 [N, V] copies) vs chunked torch vs the fused Triton kernel.

CPU: each variant runs in a fresh subprocess and we report the growth of the peak RSS above the RSS after the
logits were allocated; the Triton kernel runs under the interpreter there (its speed is meaningless, its memory is
the interpreter's). CUDA (used automatically when available; ``--cpu`` forces the CPU variant):
torch.cuda.max_memory_allocated above the logits, and timings with iclr25.shared.benchmark, also for TRL's chunked
``entropy_from_logits`` when TRL is installed.

    python packages/mallowspo/benchmarks/bench_entropy_memory.py --rows 1024 --vocab 32768 --out results/entropy.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

METHODS = ("naive", "chunked", "fused")


def _child(method: str, rows: int, vocab: int, dtype: str) -> dict:
    import resource
    import time

    if method == "fused":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    from iclr25.mallowspo.dispersion import token_entropy
    from iclr25.mallowspo.kernels import fused_logp_entropy_reference, logp_entropy

    torch.manual_seed(0)
    logits = torch.randn(rows, vocab, dtype=getattr(torch, dtype)) * 2
    labels = torch.randint(0, vocab, (rows,))
    # warm the code paths on a tiny input so their one-off allocations are not counted
    if method == "fused":
        logp_entropy(logits[:2], labels[:2], backend="triton")
    else:
        fused_logp_entropy_reference(logits[:2], labels[:2])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if method == "naive":
        out = fused_logp_entropy_reference(logits, labels)[1]
    elif method == "chunked":
        out = token_entropy(logits, chunk_size=256)
    else:
        out = logp_entropy(logits, labels, backend="triton")[1]
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"extra_peak_mib": (peak - base) / 1024.0, "seconds": dt, "checksum": float(out.double().sum())}


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
    ap.add_argument("--out", default="results/mallowspo_entropy_memory.json")
    ap.add_argument("--child", choices=METHODS)
    ap.add_argument("--cpu", action="store_true", help="force the CPU variant even when CUDA is available")
    args = ap.parse_args()
    import torch

    use_gpu = torch.cuda.is_available() and not args.cpu and not args.child
    args.rows = args.rows or (8192 if use_gpu else 1024)
    args.vocab = args.vocab or (128256 if use_gpu else 32768)
    args.dtype = args.dtype or ("bfloat16" if use_gpu else "float32")
    if args.child:
        print(json.dumps(_child(args.child, args.rows, args.vocab, args.dtype)))
        return
    from iclr25.shared import write_result

    if use_gpu:
        figures = _gpu(args.rows, args.vocab, args.dtype)
        device = "cuda"
    else:
        figures = {}
        for m in METHODS:
            res = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    m,
                    "--rows",
                    str(args.rows),
                    "--vocab",
                    str(args.vocab),
                    "--dtype",
                    args.dtype,
                ],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ},
            )
            figures[m] = json.loads(res.stdout.strip().splitlines()[-1])
        device = "cpu"
    logits_mib = args.rows * args.vocab * (2 if args.dtype in ("bfloat16", "float16") else 4) / 2**20
    figures["logits_mib"] = logits_mib
    for m in ("chunked", "fused"):
        # a ratio only when the denominator is measurable (ru_maxrss has KiB granularity; < 1 MiB reads as "none")
        denom = figures.get(m, {}).get("extra_peak_mib", 0.0)
        figures[f"memory_ratio_naive_over_{m}"] = figures["naive"]["extra_peak_mib"] / denom if denom >= 1 else None
    record = {
        "name": "mallowspo_entropy_memory",
        "params": {"rows": args.rows, "vocab": args.vocab, "dtype": args.dtype, "device": device},
        "figures": figures,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out, record)
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
