"""Dense DELTA vs the same model run as per-pixel sparse tracks (CoTracker-style dense-by-chunks): seconds per clip
and the speed ratio, measured in one run (CPU or GPU).

    python packages/delta/benchmarks/bench_delta_dense_vs_sparse.py [--config tiny] [--size 64 64] [--frames 8]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from iclr25.shared import benchmark, write_result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="tiny", choices=["micro", "tiny", "paper"])
    p.add_argument("--size", type=int, nargs=2, default=[64, 64], metavar=("H", "W"))
    p.add_argument("--frames", type=int, default=8)
    p.add_argument("--chunk", type=int, default=256, help="sparse queries per model call")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_delta_dense_vs_sparse.json"))
    a = p.parse_args(argv)
    from iclr25.delta import DeltaConfig, DeltaTracker, render_synthetic_clip
    from iclr25.delta.baselines import sparse_per_pixel

    cfg = getattr(DeltaConfig, a.config)().replace(model_resolution=None)
    torch.manual_seed(0)
    tracker = DeltaTracker(cfg, device=a.device)
    h, w = a.size
    clip = render_synthetic_clip(seed=0, num_frames=a.frames, height=h, width=w)
    dense = benchmark(lambda: tracker.track(clip.video, clip.depth), warmup=1, repeat=a.repeat)
    sparse = benchmark(lambda: sparse_per_pixel(tracker, clip.video, clip.depth, chunk=a.chunk), warmup=0, repeat=1)
    ratio = sparse.median / dense.median
    print(f"{a.config} {h}x{w}x{a.frames} on {a.device}: dense {dense.median:.2f} s, per-pixel sparse "
          f"{sparse.median:.2f} s ({h * w} queries, {a.chunk}/call): dense is {ratio:.1f}x faster")  # fmt: skip
    return write_result(
        a.out,
        {
            "name": "delta_dense_vs_sparse",
            "params": {"config": a.config, "size": [h, w], "frames": a.frames, "chunk": a.chunk, "device": a.device},
            "figures": {"dense_s": dense.median, "sparse_s": sparse.median, "speedup": ratio},
        },
    )


if __name__ == "__main__":
    main()
