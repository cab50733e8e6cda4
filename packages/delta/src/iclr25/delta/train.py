"""Training on synthetic clips with exact ground truth: official losses and optimiser, checkpoints and resume."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import numpy as np
import torch

from iclr25.shared import atomic_write, progress

from .checkpoint import FORMAT
from .data.synthetic import SyntheticClip, render_synthetic_clip
from .losses import confidence_loss, coords_loss, depth_loss, visibility_loss
from .model import DeltaModel


@dataclass
class TrainConfig:
    steps: int = 200
    lr: float = 1e-4  # train.py: AdamW lr 1e-4
    weight_decay: float = 1e-5  # train.py: wdecay 1e-5
    eps: float = 1e-8  # train.py: AdamW eps 1e-8
    pct_start: float = 0.05  # OneCycleLR, 5% warm-up, linear anneal
    grad_clip: float = 10.0  # train.py: clip_grad_norm 10
    stage: str = "3d"  # "2d": pretraining (lambda_2d = 100, no depth loss); "3d": lambda_2d = 50 + depth loss
    lambda_depth: float = 1.0
    lambda_vis: float = 1.0
    lambda_conf: float = 1.0
    num_frames: int = 8
    height: int = 32
    width: int = 32
    num_sparse: int = 32  # ground-truth sparse trajectories per clip (official: 256 + a 12x16 grid)
    num_clips: int | None = None  # None: a fresh clip every step; N: cycle over a fixed pool of N clips
    augment: bool = True  # time reversal (p=0.5), flip (p=0.5), colour jitter, eraser, patch replace, blur
    late_query_frac: float = 0.25  # train.py sample_sparse_queries: N // 4 tracks queried at a random visible frame
    eraser_prob: float = 0.5  # kubric_dataset.py: per frame after the first, p = 0.5
    replace_prob: float = 0.5  # kubric_dataset.py: per frame after the first, p = 0.5
    blur_prob: float = 0.25  # kubric_dataset.py: GaussianBlur(11, sigma=(0.1, 2.0)) with p = 0.25
    max_boxes: int = 10  # kubric_dataset.py: eraser_max = replace_max = 10 boxes per frame
    seed: int = 0
    checkpoint: str | None = None
    checkpoint_every: int = 50
    stop_after: int | None = None  # stop (with a checkpoint) after this many steps of a longer ``steps`` schedule
    log_every: int = 10

    @property
    def lambda_2d(self) -> float:
        return 100.0 if self.stage == "2d" else 50.0

    def validate(self) -> TrainConfig:
        if self.stage not in ("2d", "3d"):
            raise ValueError(f"stage must be '2d' or '3d', got {self.stage!r}")
        if self.stop_after is not None and self.stop_after < 1:
            raise ValueError(f"stop_after must be >= 1 (or None), got {self.stop_after}")
        if self.steps < 1 or self.height % 16 or self.width % 16:
            raise ValueError("steps must be >= 1 and height/width multiples of 16")
        return self


@dataclass
class Sample:
    video: torch.Tensor  # [T, 3, H, W] float 0..255
    depth: torch.Tensor  # [T, H, W]
    uv: torch.Tensor  # [T, H, W, 2] dense ground truth of every frame-0 pixel
    track_depth: torch.Tensor  # [T, H, W]
    visibility: torch.Tensor  # [T, H, W] bool
    queries: torch.Tensor  # [N, 3] (t, x, y): frame-0 pixel tracks queried at frame t (0 or a later visible frame)
    q_index: torch.Tensor  # [N] flat frame-0 pixel index of every sparse track


def _boxes(rng: np.random.Generator, h: int, w: int, max_boxes: int):
    """Random boxes (x0, x1, y0, y1): official eraser/replace geometry, sizes scaled from 512 px to the clip width."""
    lo, hi = 2, max(3, round(100 * w / 512))  # official bounds [2, 100) at 512 px
    for _ in range(rng.integers(1, max_boxes + 1)):
        xc, yc = rng.integers(0, w), rng.integers(0, h)
        dx, dy = rng.integers(lo, hi), rng.integers(lo, hi)
        x0, x1 = (int(np.clip(round(xc - dx / 2), 0, w - 1)), int(np.clip(round(xc + dx / 2), 0, w - 1)))
        y0, y1 = (int(np.clip(round(yc - dy / 2), 0, h - 1)), int(np.clip(round(yc + dy / 2), 0, h - 1)))
        yield x0, x1, y0, y1


def _occlude(vis: torch.Tensor, uv: torch.Tensor, box) -> None:
    """Mark tracks whose position lies inside the box as occluded (official: x0 <= x < x1, y0 <= y < y1)."""
    x0, x1, y0, y1 = box
    inside = (uv[..., 0] >= x0) & (uv[..., 0] < x1) & (uv[..., 1] >= y0) & (uv[..., 1] < y1)
    vis[inside] = False


def gaussian_blur(frame: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of one [3, H, W] frame (reflect padding), kernel 2 * ceil(3 sigma) + 1."""
    r = max(1, int(math.ceil(3 * sigma)))
    x = torch.arange(-r, r + 1, dtype=frame.dtype)
    k = torch.exp(-0.5 * (x / sigma) ** 2)
    k = k / k.sum()
    f = torch.nn.functional.pad(frame[None], (r, r, r, r), mode="reflect")
    f = torch.nn.functional.conv2d(f, k.reshape(1, 1, 1, -1).expand(3, 1, 1, -1), groups=3)
    f = torch.nn.functional.conv2d(f, k.reshape(1, 1, -1, 1).expand(3, 1, -1, 1), groups=3)
    return f[0]


def photometric_augment(video, uv, vis, rng: np.random.Generator, tcfg: TrainConfig):
    """The paper's eraser, patch-replace and blur augmentations (in place on float video [T, 3, H, W] 0..255).

    Eraser: in each frame after the first with p=0.5, 1..10 boxes are filled with their mean colour; patch replace:
    with p=0.5 per frame, 1..10 boxes are overwritten by a same-size patch from a random frame and place. Tracks whose
    ground-truth position falls in a box become occluded in that frame. Blur: with p=0.25 every frame is blurred with
    its own sigma in [0.1, 2.0] x (W / 512) (the official range, scaled to the clip width).
    """
    t, _, h, w = video.shape
    src = video.clone()
    for i in range(1, t):
        if rng.random() < tcfg.eraser_prob:
            for box in _boxes(rng, h, w, tcfg.max_boxes):
                x0, x1, y0, y1 = box
                if x1 > x0 and y1 > y0:
                    video[i, :, y0:y1, x0:x1] = video[i, :, y0:y1, x0:x1].mean((1, 2), keepdim=True)
                _occlude(vis[i], uv[i], box)
    for i in range(1, t):
        if rng.random() < tcfg.replace_prob:
            for box in _boxes(rng, h, w, tcfg.max_boxes):
                x0, x1, y0, y1 = box
                hei, wid = y1 - y0, x1 - x0
                ys, xs, fr = rng.integers(0, h - hei), rng.integers(0, w - wid), rng.integers(0, t)
                video[i, :, y0:y1, x0:x1] = src[fr, :, ys : ys + hei, xs : xs + wid]
                _occlude(vis[i], uv[i], box)
    if rng.random() < tcfg.blur_prob:
        for i in range(t):
            video[i] = gaussian_blur(video[i], max(0.1, rng.uniform(0.1, 2.0) * w / 512))
    return video, vis


def make_sample(
    clip: SyntheticClip,
    num_sparse: int,
    rng: np.random.Generator,
    flip=False,
    jitter=None,
    tcfg: TrainConfig | None = None,
) -> Sample:
    """Tensors of one clip with optional flip / jitter and (``tcfg.augment``) the photometric augmentations.

    Sparse queries follow the official sampler: ``late_query_frac`` of the tracks are queried at a random frame where
    they are visible, the others at their first visible frame (frame 0 for the renderer's frame-0 pixel tracks).
    """
    video = torch.from_numpy(clip.video.astype(np.float32))
    depth = torch.from_numpy(clip.depth.astype(np.float32))
    uv = torch.from_numpy(clip.tracks_uv.astype(np.float32))
    tdepth = torch.from_numpy(clip.tracks_xyz[..., 2].astype(np.float32))
    vis = torch.from_numpy(clip.visibility.copy())
    t, h, w = depth.shape
    if flip:
        video, depth, tdepth, vis = video.flip(-1), depth.flip(-1), tdepth.flip(-1), vis.flip(-1)
        uv = uv.flip(2)
        uv = torch.stack([(w - 1) - uv[..., 0], uv[..., 1]], -1)
    if jitter is not None:
        contrast, brightness = jitter
        video = (video * contrast + brightness).clamp(0, 255)
    if tcfg is not None and tcfg.augment:
        video, vis = photometric_augment(video.contiguous(), uv, vis.contiguous(), rng, tcfg)
    idx = torch.from_numpy(rng.choice(h * w, size=min(num_sparse, h * w), replace=False))
    flat_vis = vis.reshape(t, -1)[:, idx]  # T N
    flat_uv = uv.reshape(t, -1, 2)[:, idx]
    q_t = flat_vis.float().argmax(0)  # first visible frame
    frac = 0.0 if tcfg is None else tcfg.late_query_frac
    n_late = int(len(idx) * frac)
    for k in range(n_late):
        frames = torch.nonzero(flat_vis[:, k])[:, 0]
        if len(frames):
            q_t[k] = frames[int(rng.integers(len(frames)))]
    ar = torch.arange(len(idx))
    q = torch.stack([q_t.float(), flat_uv[q_t, ar, 0], flat_uv[q_t, ar, 1]], 1)
    return Sample(video, depth, uv, tdepth, vis, q, idx)


def window_frames(start: int, length: int, t: int) -> torch.Tensor:
    return torch.arange(start, start + length).clamp(max=t - 1)


def compute_loss(model: DeltaModel, s: Sample, tcfg: TrainConfig, backend: str = "auto") -> tuple[torch.Tensor, dict]:
    """One forward pass in training mode (global attention) and the official loss, summed over windows / #windows."""
    t, _, h, w = s.video.shape
    out = model(
        s.video[None], s.depth[None], sparse_queries=s.queries[None], dense=True, efficient=False,
        keep_windows=True, with_anchors=False, backend=backend,
    )  # fmt: skip
    ns = out.n_sparse
    dmax = s.track_depth.max()
    flat_uv, flat_d, flat_v = s.uv.reshape(t, -1, 2), s.track_depth.reshape(t, -1), s.visibility.reshape(t, -1)
    parts = {"2d": 0.0, "depth": 0.0, "vis": 0.0, "conf": 0.0}
    for win in out.windows:
        fr = window_frames(win.start, len(win.vis_logit[0]), t)
        g_uv, g_d, g_v = flat_uv[fr], flat_d[fr], flat_v[fr]
        # sparse tracks (H/4 units -> pixels), masked to the clip's frames
        sp_c = [c[0, :, :ns] * 4.0 for c in win.coords]
        sp_d = [d[0, :, :ns] for d in win.depth]
        gs_uv, gs_d, gs_v = g_uv[:, s.q_index], g_d[:, s.q_index], g_v[:, s.q_index]
        # official valid set: frames at or after each track's query frame (inside the clip)
        in_clip = torch.arange(win.start, win.start + len(fr)) < t
        valid = ((fr[:, None] >= s.queries[None, :, 0].long()) & in_clip[:, None]).float()
        parts["2d"] = parts["2d"] + coords_loss(sp_c, gs_uv, (h, w), valid)
        parts["depth"] = parts["depth"] + depth_loss(sp_d, gs_d, dmax, valid)
        parts["vis"] = parts["vis"] + visibility_loss(win.vis_logit[0, :, :ns], gs_v, balanced=True, mask=valid)
        parts["conf"] = parts["conf"] + confidence_loss(win.conf_logit[0, :, :ns], sp_c[-1], gs_uv, gs_v, (h, w), valid)
        # dense tracks: every iteration upsampled to full resolution with the window-0 weights
        dense_uv, dense_d = [], []
        for c, d in zip(win.coords, win.depth):
            up = model.upsample_fields(
                out.upsample_weights, c[:, :, ns:], d[:, :, ns:], None, None, out.dense_hw, out.dense_origin, backend,
                query_depth=out.dense_query_depth,
            )  # fmt: skip
            dense_uv.append(up["uv"][0].reshape(len(fr), -1, 2))
            dense_d.append(up["depth"][0].reshape(len(fr), -1))
        up = model.upsample_fields(
            out.upsample_weights, win.coords[-1][:, :, ns:], None, win.vis_logit[:, :, ns:], win.conf_logit[:, :, ns:],
            out.dense_hw, out.dense_origin, backend,
        )  # fmt: skip
        vis_l, conf_l = up["vis_logit"][0].reshape(len(fr), -1), up["conf_logit"][0].reshape(len(fr), -1)
        parts["2d"] = parts["2d"] + coords_loss(dense_uv, g_uv, (h, w))
        parts["depth"] = parts["depth"] + depth_loss(dense_d, g_d, dmax)
        parts["vis"] = parts["vis"] + visibility_loss(vis_l, g_v, balanced=False)
        parts["conf"] = parts["conf"] + confidence_loss(conf_l, dense_uv[-1], g_uv, g_v, (h, w))
    nw = len(out.windows)
    lam_d = 0.0 if tcfg.stage == "2d" else tcfg.lambda_depth
    weights = {"2d": tcfg.lambda_2d, "depth": lam_d, "vis": tcfg.lambda_vis, "conf": tcfg.lambda_conf}
    total = sum(weights[k] * parts[k] for k in parts) / nw
    return total, {k: float(v.detach() if isinstance(v, torch.Tensor) else v) / nw for k, v in parts.items()}


class SyntheticStream:
    """Deterministic clips: step i uses clip seed (seed * 100003 + i) or, with a pool, (seed * 100003 + i % pool)."""

    def __init__(self, tcfg: TrainConfig):
        self.tcfg = tcfg
        self._cache: dict = {}

    def __call__(self, step: int) -> Sample:
        c = self.tcfg
        rng = np.random.default_rng([c.seed, step])
        key = step if c.num_clips is None else step % c.num_clips
        reverse = bool(c.augment and rng.random() < 0.5)
        ck = (key, reverse)
        if ck not in self._cache:
            clip = render_synthetic_clip(
                seed=c.seed * 100003 + key, num_frames=c.num_frames, height=c.height, width=c.width,
                time_reversed=reverse,
            )  # fmt: skip
            if c.num_clips is None:
                self._cache.clear()
            self._cache[ck] = clip
        flip = bool(c.augment and rng.random() < 0.5)
        jitter = (rng.uniform(0.8, 1.2), rng.uniform(-20, 20)) if c.augment else None
        return make_sample(self._cache[ck], c.num_sparse, rng, flip=flip, jitter=jitter, tcfg=c)


def make_optimizer(model: DeltaModel, tcfg: TrainConfig):
    opt = torch.optim.AdamW(model.parameters(), lr=tcfg.lr, weight_decay=tcfg.weight_decay, eps=tcfg.eps)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=tcfg.lr, total_steps=tcfg.steps + 100, pct_start=tcfg.pct_start, cycle_momentum=False,
        anneal_strategy="linear",
    )  # fmt: skip
    return opt, sched


def save_training_state(path, model, opt, sched, step: int, history: list, tcfg: TrainConfig) -> None:
    payload = {
        "format": FORMAT,
        "config": model.cfg.to_dict(),
        "state_dict": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "step": step,
        "history": history,
        "train_config": dataclasses.asdict(tcfg),
    }
    with atomic_write(path, "wb") as f:
        torch.save(payload, f)


def export_training_state(state_path, out_path, dense_depth: str | None = None) -> dict:
    """Write the model of a training state file as a plain checkpoint (no optimizer), recording in ``extra`` the
    training configuration and the step it stopped at (the demo reads the training resolution from it).

    ``dense_depth`` sets the exported model's dense-depth mode (an inference option: the weights are unchanged);
    both the trained and the exported modes are recorded."""
    from .checkpoint import load_checkpoint, save_checkpoint

    if not os.path.isfile(state_path):
        raise ValueError(f"training state not found: {state_path}")
    state = torch.load(state_path, map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or state.get("format") != FORMAT or "train_config" not in state:
        raise ValueError(f"{state_path} is not a delta training state (written by train with a checkpoint path)")
    config = dict(state["config"])
    trained_mode = config.get("dense_depth", "absolute")
    if dense_depth is not None:
        config["dense_depth"] = dense_depth
    model = load_checkpoint({"format": FORMAT, "config": config, "state_dict": state["state_dict"]})
    last = state["history"][-50:]
    extra = {
        "train": dict(state["train_config"]),
        "step": int(state["step"]),
        "trained_dense_depth": trained_mode,
        "dense_depth": model.cfg.dense_depth,
        "mean_loss_last_50": float(np.mean([h["loss"] for h in last])) if last else None,
    }
    save_checkpoint(model, out_path, extra=extra)
    return extra


def train(model: DeltaModel, tcfg: TrainConfig, show_progress: bool = True, backend: str = "auto") -> list[dict]:
    """Train ``model`` for ``tcfg.steps`` steps; resumes from ``tcfg.checkpoint`` if it exists. Returns the history."""
    tcfg.validate()
    opt, sched = make_optimizer(model, tcfg)
    start, history = 0, []
    if tcfg.checkpoint and os.path.isfile(tcfg.checkpoint):
        state = torch.load(tcfg.checkpoint, map_location="cpu", weights_only=False)
        if state.get("format") != FORMAT or "optimizer" not in state:
            raise ValueError(f"{tcfg.checkpoint} is not a delta training checkpoint")
        model.load_state_dict(state["state_dict"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start, history = int(state["step"]), list(state["history"])
    stream = SyntheticStream(tcfg)
    model.train()
    end = tcfg.steps if tcfg.stop_after is None else min(tcfg.steps, tcfg.stop_after)
    steps = range(start, end)
    it = progress(steps, desc="train", disable=not show_progress) if show_progress else steps
    for step in it:
        loss, parts = compute_loss(model, stream(step), tcfg, backend)
        if not math.isfinite(float(loss.detach())):
            raise FloatingPointError(f"non-finite loss at step {step}: {parts}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.grad_clip)
        opt.step()
        sched.step()
        history.append({"step": step, "loss": float(loss.detach()), **parts})
        done = step + 1
        if tcfg.checkpoint and (done % tcfg.checkpoint_every == 0 or done == end):
            save_training_state(tcfg.checkpoint, model, opt, sched, done, history, tcfg)
    model.eval()
    return history
