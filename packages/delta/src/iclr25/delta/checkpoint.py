"""Checkpoints: our own format (config + state dict, written atomically) and the official DELTA layout.

Official checkpoints (``densetrack3d.pth``) are a state dict, possibly wrapped as ``{"model": ...}`` or
``{"state_dict": ...}`` and prefixed by ``module.``, with the official top-level module names. ``map_official_keys``
renames those top-level names to ours (table ``OFFICIAL_PREFIXES``); loading is strict and reports every missing,
unexpected or mis-shaped key, so a layout mismatch fails loudly instead of running with random weights.
"""

from __future__ import annotations

import os

import torch

from iclr25.shared import atomic_write

from .config import DeltaConfig
from .model import DeltaModel

FORMAT = "iclr25.delta/1"

# official top-level name -> ours (read from densetrack3d.py's constructor)
OFFICIAL_PREFIXES = {
    "fnet.": "encoder.",
    "updateformer.virual_tracks": "updater.virtual_tracks",  # (sic) the official attribute name
    "updateformer.": "updater.",
    "cmdtop.": "corr.mlps.",
    "norm.": "feat_norm.",
    "track_feat_updater.0.": "feat_update.",
    "vis_predictor.0.": "vis_head.",
    "conf_predictor.0.": "conf_head.",
    "upsample_transformer.": "upsampler.",
}
OFFICIAL_BUFFERS = ("time_emb", "pos_emb", "delta_corr")  # recomputed here, not loaded


def save_checkpoint(model: DeltaModel, path, extra: dict | None = None) -> None:
    payload = {"format": FORMAT, "config": model.cfg.to_dict(), "state_dict": model.state_dict(), "extra": extra or {}}
    with atomic_write(path, "wb") as f:
        torch.save(payload, f)


def unwrap_state_dict(obj) -> dict:
    """Accept a raw state dict or ``{"model"|"state_dict": sd}``; strip ``module.`` prefixes."""
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    elif isinstance(obj, dict) and "model" in obj and isinstance(obj["model"], dict):
        obj = obj["model"]
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        raise ValueError("checkpoint does not contain a state dict (expected a mapping of parameter names to tensors)")
    return {(k[7:] if k.startswith("module.") else k): v for k, v in obj.items()}


def map_official_keys(sd: dict) -> dict:
    out = {}
    for k, v in sd.items():
        if k in OFFICIAL_BUFFERS:
            continue
        for old, new in OFFICIAL_PREFIXES.items():
            if k.startswith(old):
                k = new + k[len(old) :]
                break
        out[k] = v
    return out


def load_state_dict_checked(model: DeltaModel, sd: dict) -> None:
    own = model.state_dict()
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own))
    shapes = [
        f"{k}: {tuple(sd[k].shape)} vs {tuple(own[k].shape)}" for k in own if k in sd and sd[k].shape != own[k].shape
    ]
    if missing or unexpected or shapes:
        raise ValueError(
            f"state dict does not match the model: {len(missing)} missing (e.g. {missing[:5]}), "
            f"{len(unexpected)} unexpected (e.g. {unexpected[:5]}), shape mismatches {shapes[:5]}"
        )
    model.load_state_dict(sd)


def load_checkpoint(path, map_location="cpu", config: DeltaConfig | None = None) -> DeltaModel:
    """Load our checkpoint, or an official-layout state dict (then ``config`` defaults to ``DeltaConfig.paper()``)."""
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint not found: {path}")
    obj = torch.load(path, map_location=map_location, weights_only=False)
    if isinstance(obj, dict) and obj.get("format") == FORMAT:
        model = DeltaModel(DeltaConfig.from_dict(obj["config"]))
        load_state_dict_checked(model, obj["state_dict"])
        return model
    model = DeltaModel(config or DeltaConfig.paper())
    load_state_dict_checked(model, map_official_keys(unwrap_state_dict(obj)))
    return model
