"""Checkpoints: our own format (config + state dict, written atomically) and official DELTA state dicts.

The module and parameter names of ``DeltaModel`` are the official ones, so an official checkpoint
(``densetrack3d.pth``: a state dict, possibly wrapped as ``{"model": ...}`` or ``{"state_dict": ...}`` and prefixed by
``module.``) loads strictly with no renaming. The official key/shape layout ships as data
(``weights/official_state_dict_manifest.json``, see ``official_manifest``); loading reports every missing,
unexpected or mis-shaped key by name, so a layout mismatch fails loudly instead of running with random weights.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import torch

from iclr25.shared import atomic_write

from .config import DeltaConfig
from .model import DeltaModel

FORMAT = "iclr25.delta/2"
MANIFEST_PATH = Path(__file__).with_name("weights") / "official_state_dict_manifest.json"


def official_manifest() -> dict[str, tuple[int, ...]]:
    """Official state-dict key -> shape for ``DeltaConfig.paper()`` (read from the shipped manifest)."""
    with open(MANIFEST_PATH) as f:
        data = json.load(f)
    return {k: tuple(shape) for k, shape in data["keys"]}


def save_checkpoint(model: DeltaModel, path, extra: dict | None = None) -> None:
    payload = {"format": FORMAT, "config": model.cfg.to_dict(), "state_dict": model.state_dict(), "extra": extra or {}}
    with atomic_write(path, "wb") as f:
        torch.save(payload, f)


def checkpoint_extra(path) -> dict:
    """The ``extra`` metadata of one of our checkpoints (e.g. how and at which resolution it was trained); {} if none."""
    obj = torch.load(path, map_location="cpu", weights_only=False)
    extra = obj.get("extra", {}) if isinstance(obj, dict) else {}
    return dict(extra) if isinstance(extra, dict) else {}


def unwrap_state_dict(obj) -> dict:
    """Accept a raw state dict or ``{"model"|"state_dict": sd}``; strip ``module.`` prefixes."""
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    elif isinstance(obj, dict) and "model" in obj and isinstance(obj["model"], dict):
        obj = obj["model"]
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        raise ValueError("checkpoint does not contain a state dict (expected a mapping of parameter names to tensors)")
    return {(k[7:] if k.startswith("module.") else k): v for k, v in obj.items()}


def load_state_dict_checked(model: DeltaModel, sd: dict) -> None:
    own = model.state_dict()
    bad = [k for k, v in sd.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"state dict entries must be tensors; not a tensor: {bad[:5]}")
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own))
    shapes = [
        f"{k}: got {tuple(sd[k].shape)}, expected {tuple(own[k].shape)}"
        for k in own
        if k in sd and sd[k].shape != own[k].shape
    ]
    if missing or unexpected or shapes:
        raise ValueError(
            f"state dict does not match the model: {len(missing)} missing {missing[:5]}, "
            f"{len(unexpected)} unexpected {unexpected[:5]}, {len(shapes)} shape mismatches {shapes[:5]}"
        )
    model.load_state_dict(sd, strict=True)


def load_checkpoint(path, map_location="cpu", config: DeltaConfig | None = None) -> DeltaModel:
    """Load our checkpoint or an official state dict (a file path, or the loaded mapping itself).

    For an official state dict ``config`` defaults to ``DeltaConfig.paper()``. Loading is strict: the keys are used
    as they are (no renaming) and every missing, unexpected or mis-shaped key is named in the error.
    """
    if isinstance(path, Mapping):
        obj = dict(path)
    else:
        if not os.path.isfile(path):
            raise ValueError(f"checkpoint not found: {path}")
        obj = torch.load(path, map_location=map_location, weights_only=False)
    if isinstance(obj, dict) and str(obj.get("format", "")).startswith("iclr25.delta/"):
        if obj["format"] != FORMAT:
            raise ValueError(
                f"checkpoint format {obj['format']!r} predates the official parameter layout ({FORMAT!r}); retrain"
            )
        model = DeltaModel(DeltaConfig.from_dict(obj["config"]))
        load_state_dict_checked(model, obj["state_dict"])
        return model
    model = DeltaModel(config or DeltaConfig.paper())
    load_state_dict_checked(model, unwrap_state_dict(obj))
    return model
