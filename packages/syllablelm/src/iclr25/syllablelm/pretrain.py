"""Train the small HuBERT-style encoder used when no pretrained speech model is available.

HuBERT's first iteration, scaled down: discrete targets are k-means clusters of MFCCs; the model learns to predict the
targets of masked frames (span masks, cross-entropy over cosine logits). The result serves as LossPred teacher and as
SylBoost's initial model. A shipped checkpoint (``assets/small_hubert.pt``) is reproducible with
``python -m iclr25.syllablelm pretrain``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.shared import atomic_write, progress

from .features import mfcc
from .hubert import HubertTeacher, small_hubert_config
from .units import KMeans

ASSET = Path(__file__).parent / "assets" / "small_hubert.pt"


@dataclass
class PretrainConfig:
    n_clusters: int = 50  # MFCC k-means targets (HuBERT iteration 1 used 100 on LibriSpeech)
    hidden: int = 96
    layers: int = 3
    heads: int = 4
    conv_dim: int = 32
    final_dim: int = 32
    steps: int = 2000
    batch_size: int = 8
    crop_frames: int = 64  # 1.28 s crops
    lr: float = 1e-3
    warmup: float = 0.1
    mask_prob: float = 0.08  # HuBERT: p = 8 % span starts
    mask_len: int = 10  # HuBERT: span length 10
    seed: int = 0


class MfccKMeansLabels:
    """``label_fn`` for ``HubertTeacher``: nearest MFCC centroid per 50 Hz frame."""

    def __init__(self, centroids: torch.Tensor):
        self.centroids = torch.as_tensor(centroids).float()

    def __call__(self, wav) -> torch.Tensor:
        km = KMeans(self.centroids.shape[0])
        km.centroids = self.centroids
        return km.predict(torch.from_numpy(mfcc(wav)))


def span_mask(bsz: int, t: int, prob: float, length: int, gen: torch.Generator) -> torch.Tensor:
    starts = torch.rand(bsz, t, generator=gen) < prob
    mask = torch.zeros(bsz, t, dtype=torch.bool)
    for i, s in zip(*torch.nonzero(starts, as_tuple=True)):
        mask[i, s : s + length] = True
    empty = ~mask.any(1)
    mask[empty, : min(length, t)] = True
    return mask


def build_model(cfg: PretrainConfig, centroids: torch.Tensor) -> HubertTeacher:
    conf = small_hubert_config(cfg.hidden, cfg.layers, cfg.heads, cfg.conv_dim)
    return HubertTeacher(conf, cfg.n_clusters, cfg.final_dim, label_fn=MfccKMeansLabels(centroids))


def pretrain_small_hubert(wavs: list, cfg: PretrainConfig | None = None, verbose: bool = False) -> HubertTeacher:
    """Train the encoder on a list of 16 kHz waveforms; returns the trained ``HubertTeacher``."""
    cfg = cfg or PretrainConfig()
    torch.manual_seed(cfg.seed)
    feats = [mfcc(w) for w in wavs]
    km = KMeans(cfg.n_clusters, n_iter=30, seed=cfg.seed).fit(torch.from_numpy(np.concatenate(feats)))
    labels = [km.predict(torch.from_numpy(f)) for f in feats]
    model = build_model(cfg, km.centroids)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    warm = max(1, int(cfg.warmup * cfg.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, cfg.steps) / cfg.steps))
    )
    gen = torch.Generator().manual_seed(cfg.seed)
    usable = [i for i, lab in enumerate(labels) if len(lab) >= cfg.crop_frames]
    if not usable:
        raise ValueError(f"no waveform has {cfg.crop_frames} frames ({cfg.crop_frames / 50:.1f} s)")
    n_samp = 320 * (cfg.crop_frames - 1) + 400
    model.train()
    for step in progress(range(cfg.steps), desc="pretrain", disable=not verbose):
        pick = torch.randint(len(usable), (cfg.batch_size,), generator=gen).tolist()
        xs, ys = [], []
        for p in pick:
            i = usable[p]
            f0 = int(torch.randint(len(labels[i]) - cfg.crop_frames + 1, (1,), generator=gen))
            xs.append(torch.as_tensor(wavs[i][320 * f0 : 320 * f0 + n_samp]).float())
            ys.append(labels[i][f0 : f0 + cfg.crop_frames])
        x, y = torch.stack(xs), torch.stack(ys)
        mask = span_mask(cfg.batch_size, cfg.crop_frames, cfg.mask_prob, cfg.mask_len, gen)
        logits = model.logits(x, mask)
        loss = F.cross_entropy(logits[mask], y[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if verbose and step % 100 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    model.eval()
    model.pretrain_config = cfg
    return model


def save_small_hubert(model: HubertTeacher, path: str | Path) -> None:
    cfg = getattr(model, "pretrain_config", PretrainConfig())
    state = {
        "config": asdict(cfg),
        "centroids": model.label_fn.centroids,
        "state_dict": {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()},
    }
    with atomic_write(path, "wb") as f:
        torch.save(state, f)


def load_small_hubert(path: str | Path | None = None) -> HubertTeacher:
    """Load a checkpoint written by ``save_small_hubert`` (default: the shipped asset)."""
    path = Path(path) if path is not None else ASSET
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; create it with `python -m iclr25.syllablelm pretrain`")
    state = torch.load(path, map_location="cpu", weights_only=True)
    for key in ("config", "centroids", "state_dict"):
        if key not in state:
            raise ValueError(f"{path} is not a small-HuBERT checkpoint (missing {key!r})")
    cfg = PretrainConfig(**state["config"])
    model = build_model(cfg, state["centroids"])
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state["state_dict"].items()})
    model.pretrain_config = cfg
    return model.eval()
