"""Triton fused Gaussian-KDE log-density vs the torch reference (chunked distances + logsumexp). GPU only.

python packages/mixmax/benchmarks/bench_mixmax_kde.py [--n 100000] [--d 16] [--out FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from iclr25.shared import benchmark, write_result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="queries = training points")
    p.add_argument("--d", type=int, nargs="+", default=[4, 16, 40])
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_mixmax_kde.json"))
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("skipped: bench_mixmax_kde needs a CUDA device (the Triton KDE is interpreted on CPU)")
        return None
    from iclr25.mixmax.kernels import kde_log_density, kde_reference

    figures = {}
    for d in a.d:
        g = torch.Generator(device="cuda").manual_seed(d)
        q = torch.randn(a.n, d, device="cuda", generator=g)
        t = torch.randn(a.n, d, device="cuda", generator=g)
        h = a.n ** (-1.0 / (d + 4))
        ref = kde_reference(q, t, h, query_chunk=4096)
        out = kde_log_density(q, t, h, backend="triton")
        err = (ref - out).abs().max().item()
        s_ref = benchmark(lambda q=q, t=t, h=h: kde_reference(q, t, h, query_chunk=4096), warmup=1, repeat=5)
        s_tri = benchmark(lambda q=q, t=t, h=h: kde_log_density(q, t, h, backend="triton"), warmup=1, repeat=5)
        figures[f"d{d}"] = {
            "torch_ms": s_ref.median * 1e3,
            "triton_ms": s_tri.median * 1e3,
            "speedup": s_ref.median / s_tri.median,
            "max_abs_err": err,
        }
        print(
            f"n={a.n} d={d}: torch {s_ref.median * 1e3:.1f} ms, triton {s_tri.median * 1e3:.1f} ms, "
            f"speedup {s_ref.median / s_tri.median:.2f}x, max |err| {err:.1e}"
        )
    write_result(a.out, {"name": "mixmax_kde_triton_vs_torch", "params": {"n": a.n, "d": a.d}, "figures": figures})
    return figures


if __name__ == "__main__":
    main()
