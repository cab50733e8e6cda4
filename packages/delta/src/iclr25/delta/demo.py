"""``python -m iclr25.delta demo``: DELTA vs zero motion vs optical-flow chaining on held-out synthetic clips, plus
dense tracking time vs the same model run as per-pixel sparse tracks (the paper's dense-speed claim, as a ratio)."""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from .baselines import flow_chaining, sparse_per_pixel, zero_motion
from .data.synthetic import render_synthetic_clip
from .evaluate import WEIGHTS, evaluate_dense_prediction

DEMO_FRAMES = 8
DEMO_SIZE = 32  # clip size when the model does not say at which resolution it was trained

NO_TRAINED_MODEL = (
    "NO TRAINED MODEL: the shipped checkpoint (weights/delta_micro_synthetic.pt) is missing from this installation. "
    "The DELTA row is a fresh zero-motion-initialised micro model (it does not track: its uv is the zero-motion "
    "answer and its depth is the H/4 grid depth upsampled). Pass --checkpoint to evaluate a trained model."
)


def trained_size(path: str | None) -> int | None:
    """The clip size a checkpoint of ours was trained at (its ``extra["train"]["height"]``), or None."""
    if path is None or not os.path.isfile(path):
        return None
    from .checkpoint import checkpoint_extra

    size = checkpoint_extra(path).get("train", {}).get("height")
    return int(size) if size else None


def _load_tracker(train_steps: int, seed: int, checkpoint: str | None = None):
    from .config import DeltaConfig
    from .model import DeltaModel
    from .tracker import DeltaTracker

    if checkpoint is not None:
        tracker = DeltaTracker.from_checkpoint(checkpoint)
        source = f"checkpoint {checkpoint}"
    elif os.path.isfile(WEIGHTS):
        tracker = DeltaTracker.from_checkpoint(WEIGHTS)
        source = f"shipped checkpoint {os.path.basename(WEIGHTS)}"
    else:
        torch.manual_seed(seed)
        tracker = DeltaTracker(model=DeltaModel(DeltaConfig.micro().replace(zero_init_head=True)))
        source = "untrained: fresh zero-motion-initialised micro model (the shipped checkpoint is missing)"
    if train_steps > 0:
        from .train import TrainConfig, train

        tcfg = TrainConfig(steps=train_steps, lr=2e-4, num_frames=DEMO_FRAMES, height=DEMO_SIZE, width=DEMO_SIZE)
        train(tracker.model, tcfg, show_progress=True)
        source += f" + {train_steps} training steps in this run"
    tracker.model.eval()
    return tracker, source


def _draw_tracks(path: str, clip, delta_uv, n: int = 24, label: str = "DELTA") -> None:
    import cv2

    t, h, w = clip.visibility.shape
    s = 12
    canvas = cv2.resize(np.ascontiguousarray(clip.video[-1].transpose(1, 2, 0)[..., ::-1]), (w * s, h * s),
                        interpolation=cv2.INTER_NEAREST)  # fmt: skip
    canvas = (0.6 * canvas).astype(np.uint8)
    rng = np.random.default_rng(0)
    ys, xs = rng.integers(0, h, n), rng.integers(0, w, n)
    for y, x in zip(ys, xs):
        for uv, col in ((clip.tracks_uv[:, y, x], (0, 255, 0)), (delta_uv[:, y, x], (0, 0, 255))):
            pts = np.round(np.asarray(uv) * s + s / 2).astype(np.int32)
            cv2.polylines(canvas, [pts.reshape(-1, 1, 2)], False, col, 1, cv2.LINE_AA)
            cv2.circle(canvas, tuple(int(v) for v in pts[-1]), 2, col, -1)
    cv2.putText(
        canvas, "green: ground truth  red: " + label, (4, 12), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (255, 255, 255), 1
    )
    ok, buf = cv2.imencode(".png", canvas)
    if ok:
        from iclr25.shared import atomic_write

        with atomic_write(path, "wb") as f:
            f.write(buf.tobytes())


def paired_ci(a, b, z: float = 1.96) -> tuple[float, float, float]:
    """Mean of the paired differences a - b and its normal-approximation 95% confidence interval."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    half = z * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def run_demo(num_clips: int = 20, train_steps: int = 0, out_png: str | None = "delta_demo_tracks.png",
             seed: int = 900_000, threads: int | None = None, checkpoint: str | None = None,
             sparse_timing: bool = True, size: int | None = None) -> dict:  # fmt: skip
    """Held-out synthetic clips (seeds ``seed``..``seed + num_clips - 1``; training uses seed*100003 + step, far
    below 900000) scored for DELTA, zero motion and flow chaining, with paired 95% intervals of DELTA - zero motion.

    ``size`` (square clips): default the resolution the model was trained at when its checkpoint records it, else 32.
    """
    if threads:
        torch.set_num_threads(threads)
    tracker, source = _load_tracker(train_steps, seed, checkpoint)
    trained = checkpoint is not None or os.path.isfile(WEIGHTS) or train_steps > 0
    if size is None:
        size = trained_size(checkpoint if checkpoint is not None else WEIGHTS) or DEMO_SIZE
    if not trained:
        print(NO_TRAINED_MODEL)
    methods = ("DELTA (dense)", "zero motion", "flow chaining (DIS)", "flow chaining (Farneback)")
    rows = {m: [] for m in methods}
    times = {m: [] for m in methods}
    clips = [render_synthetic_clip(seed=seed + i, num_frames=DEMO_FRAMES, height=size, width=size)
             for i in range(num_clips)]  # fmt: skip
    first_delta = None
    for clip in clips:
        t0 = time.perf_counter()
        res = tracker.track(clip.video, clip.depth, intrinsics=clip.K)
        times["DELTA (dense)"].append(time.perf_counter() - t0)
        rows["DELTA (dense)"].append(evaluate_dense_prediction(res.uv, res.depth, res.visibility, clip))
        first_delta = res.uv.numpy() if first_delta is None else first_delta
        for name, fn in (
            ("zero motion", lambda c: zero_motion(c.video, c.depth)),
            ("flow chaining (DIS)", lambda c: flow_chaining(c.video, c.depth, "dis")),
            ("flow chaining (Farneback)", lambda c: flow_chaining(c.video, c.depth, "farneback")),
        ):
            t0 = time.perf_counter()
            b = fn(clip)
            times[name].append(time.perf_counter() - t0)
            rows[name].append(evaluate_dense_prediction(b.uv, b.depth, b.visibility, clip))
    h = w = size
    print(f"\nDELTA demo: {num_clips} held-out synthetic clips (seeds {seed}..{seed + num_clips - 1}), {DEMO_FRAMES} "
          f"frames of {h}x{w}, exact 3D ground truth")  # fmt: skip
    print(f"model: {source}; TAP-Vid-3D metrics over every frame-0 pixel (median scaling, 256-px intrinsics)\n")
    print(f"| {'method':28s} | APD3D | AJ3D  |  OA   | EPE2D (px) | s/clip |")
    print(f"|{'-' * 30}|-------|-------|-------|------------|--------|")
    summary = {"model": source, "uses_checkpoint": trained, "seeds": [seed, seed + num_clips - 1]}
    for m in methods:
        avg = {k: float(np.mean([r[k] for r in rows[m]])) for k in rows[m][0]}
        summary[m] = {**avg, "seconds": float(np.mean(times[m]))}
        print(f"| {m:28s} | {avg['apd3d']:.3f} | {avg['aj3d']:.3f} | {avg['oa']:.3f} | {avg['epe2d']:10.3f} | "
              f"{np.mean(times[m]):6.2f} |")  # fmt: skip
    print(
        "\nDELTA - zero motion, paired over clips (mean [95% CI]); positive is better for APD3D/AJ3D/OA, negative "
        "for EPE2D:"
    )
    summary["delta_minus_zero"] = {}
    for k in ("apd3d", "aj3d", "oa", "epe2d"):
        mean, lo, hi = paired_ci([r[k] for r in rows["DELTA (dense)"]], [r[k] for r in rows["zero motion"]])
        summary["delta_minus_zero"][k] = [mean, lo, hi]
        print(f"  {k:6s} {mean:+.4f} [{lo:+.4f}, {hi:+.4f}]")
    if not trained:
        print("\n" + NO_TRAINED_MODEL)
    if out_png:
        _draw_tracks(out_png, clips[0], first_delta, label="DELTA" if trained else "DELTA (untrained)")
        print(f"tracks drawn to {out_png}")
    if not sparse_timing:
        return summary
    # dense vs per-pixel sparse with the same model, on the first clip
    clip = clips[0]
    t0 = time.perf_counter()
    tracker.track(clip.video, clip.depth)
    t_dense = time.perf_counter() - t0
    t0 = time.perf_counter()
    sp = sparse_per_pixel(tracker, clip.video, clip.depth, chunk=64)
    t_sparse = time.perf_counter() - t0
    sparse_row = evaluate_dense_prediction(sp.uv, sp.depth, sp.visibility, clip)

    print(f"| {'DELTA as per-pixel sparse':28s} | {sparse_row['apd3d']:.3f} | {sparse_row['aj3d']:.3f} | "
          f"{sparse_row['oa']:.3f} | {sparse_row['epe2d']:10.3f} | {t_sparse:6.2f} |  (clip 1 only)")  # fmt: skip
    ratio = t_sparse / t_dense
    print(f"\nDense DELTA tracked all {h * w} pixels in {t_dense:.2f} s; the same model as per-pixel sparse tracks "
          f"(64 queries + anchors per call) took {t_sparse:.2f} s: {ratio:.1f}x faster dense.")  # fmt: skip
    summary["dense_vs_sparse"] = {"dense_s": t_dense, "sparse_s": t_sparse, "ratio": ratio}
    return summary
