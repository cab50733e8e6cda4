"""Rasterizer forward and forward+backward time vs Gaussian count and resolution.

Backends, timed interleaved in one run (round r times every backend once, so load drifts hit all of them alike):
the torch reference (always), the Triton kernels (CUDA only) and, when it is installed and can run (CUDA only),
gsplat's own CUDA rasterizer (``gsplat.rasterization``), the library a user would otherwise pick. Ratios are against
the torch reference of the same run; when gsplat runs, the image difference against ours with the whole-tile
footprint is recorded too (it is not zero: gsplat caps alpha at 0.999 instead of 0.99 and uses a 3.33-sigma,
opacity-aware radius instead of 3 sigma).

    python packages/locogs/benchmarks/bench_locogs_rasterizer.py [--device cpu|cuda] [--sizes 64 128]
        [--counts 1000 10000] [--repeat 5] [--out result.json]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import torch

from iclr25.locogs import RasterConfig, rasterize
from iclr25.locogs.camera import intrinsics, look_at
from iclr25.shared import write_result

# scripts/gpu_check.sh (25 s budget): one mid-size and one large scene on the GPU
GPU_ARGS = ["--device", "cuda", "--sizes", "256", "--counts", "10000", "100000", "--repeat", "5", "--warmup", "1"]


def scene(n, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g) * 2 - 1).to(device)
    quats = torch.randn(n, 4, generator=g).to(device)
    scales = (torch.rand(n, 3, generator=g) * 0.03 + 0.005).to(device)
    opac = (torch.rand(n, generator=g) * 0.9 + 0.05).to(device)
    sh = (torch.randn(n, 16, 3, generator=g) * 0.2).to(device)
    return means, quats, scales, opac, sh


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def gsplat_status(device: str) -> tuple[object | None, str]:
    """(``gsplat.rasterization`` or None, why not)."""
    if device != "cuda":
        return None, "gsplat's rasterizer needs CUDA"
    try:
        from gsplat import rasterization
    except Exception as e:  # not installed, or its CUDA extension failed to build / load
        return None, f"gsplat unavailable: {type(e).__name__}: {e}"
    return rasterization, "ok"


def make_fns(backend, leaves, viewmat, K, size, gsplat_fn=None):
    """(forward, forward+backward) closures for one backend."""
    if backend == "gsplat":

        def run():
            m, q, s, o, sh = leaves
            img, alpha, _ = gsplat_fn(m, q, s, o, sh, viewmat[None], K[None], size, size, sh_degree=3, near_plane=0.2,
                                      eps2d=0.3, packed=False)  # fmt: skip
            return img[0], alpha[0, ..., 0]
    else:

        def run():
            return rasterize(*leaves, viewmat, K, size, size, sh_degree=3, backend=backend)

    def fwd():
        with torch.no_grad():
            return run()

    def fwd_bwd():
        img, _ = run()
        img.sum().backward()
        for t in leaves:
            t.grad = None

    return fwd, fwd_bwd


def interleaved(fns: dict, device: str, warmup: int, repeat: int) -> dict:
    """Median, min and max seconds of every closure in ``fns``, timed round-robin after ``warmup`` rounds."""
    times = {k: [] for k in fns}
    for r in range(warmup + repeat):
        for k, fn in fns.items():
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            if r >= warmup:
                times[k].append(time.perf_counter() - t0)
    return {k: {"median_ms": statistics.median(v) * 1e3, "min_ms": min(v) * 1e3, "max_ms": max(v) * 1e3,
                "repeats": len(v)} for k, v in times.items()}  # fmt: skip


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    p.add_argument("--counts", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_locogs_rasterizer.json"))
    a = p.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available")
    gsplat_fn, gsplat_note = gsplat_status(device)
    backends = ["torch"] + (["triton"] if device == "cuda" else []) + (["gsplat"] if gsplat_fn is not None else [])
    print(f"device {device}; backends {backends}; gsplat: {gsplat_note}")
    figures = {}
    for size in a.sizes:
        viewmat = look_at((0.0, -3.5, 1.2)).to(device)
        f = 0.5 * size / math.tan(math.radians(25))
        K = intrinsics(f, f, size / 2, size / 2).to(device)
        for n in a.counts:
            data = scene(n, device)
            fns, key = {}, f"{size}px_{n}"
            for be in backends:
                leaves = [t.clone().requires_grad_(True) for t in data]
                fwd, fwd_bwd = make_fns(be, leaves, viewmat, K, size, gsplat_fn)
                fns[f"{be}/forward"], fns[f"{be}/forward_backward"] = fwd, fwd_bwd
            try:
                res = interleaved(fns, device, a.warmup, a.repeat)
            except Exception as e:  # gsplat's JIT build can fail at first call: keep the other backends' figures
                if "gsplat" not in backends:
                    raise
                gsplat_note = f"gsplat failed at run time: {type(e).__name__}: {e}"
                backends.remove("gsplat")
                res = interleaved({k: v for k, v in fns.items() if not k.startswith("gsplat")}, device, a.warmup,
                                  a.repeat)  # fmt: skip
            entry = {be: {"forward_ms": res[f"{be}/forward"], "forward_backward_ms": res[f"{be}/forward_backward"]}
                     for be in backends}  # fmt: skip
            ref = entry["torch"]
            for be in backends[1:]:
                entry[f"speedup_{be}_vs_torch"] = {
                    k: ref[k]["median_ms"] / entry[be][k]["median_ms"] for k in ("forward_ms", "forward_backward_ms")
                }
            if "gsplat" in backends:
                with torch.no_grad():
                    ours, _ = rasterize(*data, viewmat, K, size, size, sh_degree=3, cfg=RasterConfig(footprint="tile"))
                    theirs, _ = make_fns("gsplat", list(data), viewmat, K, size, gsplat_fn)[0]()
                entry["max_abs_image_diff_vs_gsplat_tile_footprint"] = float((ours - theirs).abs().max())
            figures[key] = entry
            for be in backends:
                e = entry[be]
                print(f"{key} {be}: forward {e['forward_ms']['median_ms']:.2f} ms "
                      f"[{e['forward_ms']['min_ms']:.2f}, {e['forward_ms']['max_ms']:.2f}], forward+backward "
                      f"{e['forward_backward_ms']['median_ms']:.2f} ms", flush=True)  # fmt: skip
    params = vars(a) | {"device": device, "backends": backends, "gsplat": gsplat_note,
                        "threads": torch.get_num_threads(), "cpu_isa": torch.backends.cpu.get_cpu_capability()}  # fmt: skip
    write_result(a.out, {"name": "locogs_rasterizer", "params": params, "figures": figures})
    return figures


if __name__ == "__main__":
    main()
