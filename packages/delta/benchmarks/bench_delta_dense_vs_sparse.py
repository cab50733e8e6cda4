"""Self-ablation of one DELTA model: its dense mode (one track per H/4 cell + the attention upsampler) vs the same
weights run as per-pixel sparse queries (CoTracker-style dense-by-chunks). The video is encoded once and the
features are reused by both sides, so the ratio measures the tracking work only; repeats are interleaved
(dense, sparse, dense, sparse, ...) after a warm-up of each, and the median and spread are reported.

    python packages/delta/benchmarks/bench_delta_dense_vs_sparse.py [--config micro] [--size 64 64] [--frames 8]
    python packages/delta/benchmarks/bench_delta_dense_vs_sparse.py --config paper --size 384 512 --frames 16 \
        --device cuda --dtype bf16        # the paper-size configuration (GPU; fp16/bf16 autocast)

For scale, the ratio of tracked points is (H*W + calls * anchors) / (H*W/16 + anchors) (about 16): per-pixel sparse
tracks 16x more points plus the anchor grid in every call, and dense also pays for the upsampler and the local
attention. This is not a strict ceiling, because the sparse side also repeats per-call fixed work (the per-window
depth sampling, embeddings and Python overhead) in every one of its calls.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from iclr25.shared import write_result

GPU_ARGS = ["--config", "paper", "--size", "384", "512", "--frames", "16", "--dtype", "bf16", "--repeat", "3"]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="micro", choices=["micro", "tiny", "paper"])
    p.add_argument("--size", type=int, nargs=2, default=[64, 64], metavar=("H", "W"))
    p.add_argument("--frames", type=int, default=8)
    p.add_argument("--chunk", type=int, default=256, help="sparse queries per model call")
    p.add_argument("--repeat", type=int, default=3, help="interleaved timed repeats of each side (>= 3)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"], help="autocast dtype (CUDA only)")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_delta_dense_vs_sparse.json"))
    a = p.parse_args(argv)
    if a.repeat < 3:
        raise SystemExit("--repeat must be >= 3 (the median of at least three runs is reported)")
    if a.dtype != "fp32" and not a.device.startswith("cuda"):
        raise SystemExit("--dtype fp16/bf16 uses CUDA autocast; use --device cuda or --dtype fp32")
    torch.set_num_threads(a.threads)
    from iclr25.delta import DeltaConfig, DeltaModel, render_synthetic_clip

    cfg = getattr(DeltaConfig, a.config)().replace(model_resolution=None)
    torch.manual_seed(0)
    model = DeltaModel(cfg).to(a.device).eval()
    h, w = a.size
    clip = render_synthetic_clip(seed=0, num_frames=a.frames, height=h, width=w)
    video = torch.from_numpy(clip.video).float()[None].to(a.device)
    depth = torch.from_numpy(clip.depth).float()[None].to(a.device)
    if a.dtype == "fp32":
        ctx = nullcontext()
    else:
        ctx = torch.autocast("cuda", dtype={"fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype])
    yy, xx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
    queries = torch.stack([torch.zeros(h * w), xx.reshape(-1), yy.reshape(-1)], 1).to(a.device)

    with torch.no_grad(), ctx:
        _sync(a.device)
        t0 = time.perf_counter()
        encoded = model.encode(video)  # shared by both sides
        _sync(a.device)
        t_encode = time.perf_counter() - t0

        def dense():
            return model(video, depth, dense=True, encoded=encoded)

        def sparse():
            for i in range(0, h * w, a.chunk):
                model(video, depth, sparse_queries=queries[None, i : i + a.chunk], dense=False, with_anchors=True,
                      efficient=True, encoded=encoded)  # fmt: skip

        def timed(fn):
            _sync(a.device)
            t = time.perf_counter()
            fn()
            _sync(a.device)
            return time.perf_counter() - t

        timed(dense), timed(sparse)  # warm-up
        td, ts = [], []
        for _ in range(a.repeat):  # interleaved
            td.append(timed(dense))
            ts.append(timed(sparse))
    md, ms = statistics.median(td), statistics.median(ts)
    ratio = ms / md
    n_anchor = cfg.anchor_grid[0] * cfg.anchor_grid[1]
    calls = math.ceil(h * w / a.chunk)
    point_ratio = (h * w + calls * n_anchor) / ((h // 4) * (w // 4) + n_anchor)
    ratio_with_encode = (ms + t_encode) / (md + t_encode)
    isa = torch.backends.cpu.get_cpu_capability()
    print(
        f"self-ablation, {a.config} {h}x{w}x{a.frames} on {a.device} ({a.dtype}, {a.threads} thread(s), CPU ISA {isa})"
    )
    print(f"  encode once: {t_encode:.3f} s (shared)")
    print(f"  dense:   median {md:.3f} s  [{min(td):.3f}, {max(td):.3f}] over {a.repeat}")
    print(
        f"  sparse:  median {ms:.3f} s  [{min(ts):.3f}, {max(ts):.3f}] over {a.repeat} ({h * w} queries, {a.chunk}/call)"
    )
    print(
        f"  ratio {ratio:.1f}x (tracked-point ratio {point_ratio:.1f}x); with the one encode added to both sides "
        f"{ratio_with_encode:.1f}x"
    )
    return write_result(
        a.out,
        {
            "name": "delta_dense_vs_sparse_self_ablation",
            "params": {
                "config": a.config,
                "size": [h, w],
                "frames": a.frames,
                "chunk": a.chunk,
                "device": a.device,
                "dtype": a.dtype,
                "threads": a.threads,
                "repeat": a.repeat,
                "cpu_capability": isa,
                "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                "note": "same weights both sides; video encoded once and shared; interleaved repeats",
            },  # fmt: skip
            "figures": {
                "encode_s": t_encode,
                "dense_s_median": md,
                "dense_s_min": min(td),
                "dense_s_max": max(td),
                "sparse_s_median": ms,
                "sparse_s_min": min(ts),
                "sparse_s_max": max(ts),
                "ratio": ratio,
                "tracked_point_ratio": point_ratio,
                "ratio_with_encode": ratio_with_encode,
            },  # fmt: skip
        },
    )


if __name__ == "__main__":
    main()
