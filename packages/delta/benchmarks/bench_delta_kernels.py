"""Triton kernels vs torch references at the paper's scale (384x512 input, 16-frame window), plus whole-model dense
tracking of a 384x512 video with each backend: milliseconds, seconds per video and peak memory. GPU only.

    python packages/delta/benchmarks/bench_delta_kernels.py [--frames 24] [--tracks 4096]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from iclr25.shared import benchmark, write_result


def _peak(fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=24, help="video length for the whole-model run")
    p.add_argument("--tracks", type=int, default=4096, help="tracks for the correlation micro-benchmark")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_delta_kernels.json"))
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("skipped: bench_delta_kernels needs a CUDA device (the Triton kernels are interpreted on CPU)")
        return None
    from iclr25.delta import DeltaConfig, DeltaTracker
    from iclr25.delta.kernels import convex_upsample_reference, corr4d_local_reference, local_corr4d, upsample_convex

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    figures = {}
    # correlation at H/4 of 384x512 (96x128, 128 channels), one 16-frame window, radius 3
    fmap = torch.randn(1, 16, 96, 128, 128, device=dev, generator=g)
    coords = torch.rand(1, 16, a.tracks, 2, device=dev, generator=g) * torch.tensor([127.0, 95.0], device=dev)
    supp = torch.randn(1, a.tracks, 49, 128, device=dev, generator=g)
    err = (local_corr4d(fmap, coords, supp, 3, backend="triton") - corr4d_local_reference(fmap, coords, supp, 3)).abs()
    s_ref = benchmark(lambda: corr4d_local_reference(fmap, coords, supp, 3), warmup=2, repeat=5)
    s_tri = benchmark(lambda: local_corr4d(fmap, coords, supp, 3, backend="triton"), warmup=2, repeat=5)
    m_ref = _peak(lambda: corr4d_local_reference(fmap, coords, supp, 3))
    m_tri = _peak(lambda: local_corr4d(fmap, coords, supp, 3, backend="triton"))
    figures["corr4d"] = {"torch_ms": s_ref.median * 1e3, "triton_ms": s_tri.median * 1e3,
                         "speedup": s_ref.median / s_tri.median, "torch_peak_gib": m_ref, "triton_peak_gib": m_tri,
                         "max_abs_err": err.max().item()}  # fmt: skip
    # convex upsampling of 5 x 24 channels from 96x128 to 384x512
    x = torch.randn(1, 120, 96, 128, device=dev, generator=g)
    wts = torch.randn(1, 25, 384, 512, device=dev, generator=g).softmax(1)
    s_ref = benchmark(lambda: convex_upsample_reference(x, wts, 4, 5), warmup=2, repeat=5)
    s_tri = benchmark(lambda: upsample_convex(x, wts, 4, 5, backend="triton"), warmup=2, repeat=5)
    figures["convex_upsample"] = {"torch_ms": s_ref.median * 1e3, "triton_ms": s_tri.median * 1e3,
                                  "speedup": s_ref.median / s_tri.median,
                                  "torch_peak_gib": _peak(lambda: convex_upsample_reference(x, wts, 4, 5)),
                                  "triton_peak_gib": _peak(lambda: upsample_convex(x, wts, 4, 5, backend="triton"))}  # fmt: skip
    # whole model, paper configuration with random weights, dense tracking of every pixel
    torch.manual_seed(0)
    video = torch.randint(0, 255, (a.frames, 3, 384, 512), dtype=torch.uint8)
    depth = 1.0 + torch.rand(a.frames, 384, 512)
    for backend in ("torch", "triton"):
        tr = DeltaTracker(DeltaConfig.paper(), device=dev, backend=backend, memory_budget_gb=8.0)
        with torch.autocast("cuda", enabled=False):
            st = benchmark(lambda tr=tr: tr.track(video, depth), warmup=1, repeat=2)
            peak = _peak(lambda tr=tr: tr.track(video, depth))
        figures[f"dense_{backend}"] = {"seconds_per_video": st.median, "peak_gib": peak}
    figures["dense_speedup"] = (
        figures["dense_torch"]["seconds_per_video"] / figures["dense_triton"]["seconds_per_video"]
    )
    for k, v in figures.items():
        print(k, v)
    return write_result(a.out, {"name": "delta_kernels", "params": {"frames": a.frames, "tracks": a.tracks},
                                "figures": figures})  # fmt: skip


if __name__ == "__main__":
    main()
