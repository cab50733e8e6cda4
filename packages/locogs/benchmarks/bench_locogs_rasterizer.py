"""Rasterizer forward and forward+backward time vs Gaussian count and resolution: the torch reference on CPU; on a
GPU also the Triton kernels, as a ratio against the reference measured in the same run.

    python packages/locogs/benchmarks/bench_locogs_rasterizer.py [--sizes 64 128] [--counts 1000 10000]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from iclr25.locogs import rasterize
from iclr25.locogs.camera import intrinsics, look_at
from iclr25.shared import benchmark, write_result


def scene(n, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g) * 2 - 1).to(device)
    quats = torch.randn(n, 4, generator=g).to(device)
    scales = (torch.rand(n, 3, generator=g) * 0.03 + 0.005).to(device)
    opac = (torch.rand(n, generator=g) * 0.9 + 0.05).to(device)
    sh = (torch.randn(n, 16, 3, generator=g) * 0.2).to(device)
    return means, quats, scales, opac, sh


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    p.add_argument("--counts", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_locogs_rasterizer.json"))
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    backends = ["torch", "triton"] if device == "cuda" else ["torch"]
    figures = {}
    for size in a.sizes:
        viewmat = look_at((0.0, -3.5, 1.2)).to(device)
        f = 0.5 * size / math.tan(math.radians(25))
        K = intrinsics(f, f, size / 2, size / 2).to(device)
        for n in a.counts:
            means, quats, scales, opac, sh = scene(n, device)
            for be in backends:
                leaves = [t.clone().requires_grad_(True) for t in (means, quats, scales, opac, sh)]

                cam_args = (viewmat, K, size, size)

                def fwd(leaves=leaves, be=be, cam_args=cam_args):
                    with torch.no_grad():
                        return rasterize(*leaves, *cam_args, sh_degree=3, backend=be)

                def fwd_bwd(leaves=leaves, be=be, cam_args=cam_args):
                    img, _ = rasterize(*leaves, *cam_args, sh_degree=3, backend=be)
                    img.sum().backward()

                s_f = benchmark(fwd, warmup=3, repeat=a.repeat)
                s_fb = benchmark(fwd_bwd, warmup=3, repeat=a.repeat)
                key = f"{be}_{size}px_{n}"
                figures[key] = {"forward_ms": s_f.median * 1e3, "forward_backward_ms": s_fb.median * 1e3}
                print(f"{key}: forward {s_f.median * 1e3:.1f} ms, forward+backward {s_fb.median * 1e3:.1f} ms")
            if device == "cuda":
                t, r = figures[f"triton_{size}px_{n}"], figures[f"torch_{size}px_{n}"]
                figures[f"speedup_{size}px_{n}"] = {k: r[k] / t[k] for k in t}
    write_result(a.out, {"name": "locogs_rasterizer", "params": vars(a) | {"device": device}, "figures": figures})
    return figures


if __name__ == "__main__":
    main()
