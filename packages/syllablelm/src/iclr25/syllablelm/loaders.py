"""Loaders for official SyllableLM artefacts from local files.

- ``load_fairseq_lm``: a fairseq ``cluster_alan`` checkpoint (``{"model": state_dict, "cfg": {"model": ...}}``) into
  ``SyllableLM``, with a strict key/shape check. Official names: ``embed_weight [V+1, d]``, ``pe [1, 3000, d]``,
  ``encoder.blocks.{i}.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}``.
- ``load_official_units``: the released k-means centroids (``.npy [K, D]``) and agglomerative table
  (``.npy [K]``) into a ``SylBoostTokenizer`` around a user-supplied encoder.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ._keymap import rename_key
from .lm import SyllableLM, SyllableLMConfig
from .tokenizer import load_official_units  # re-exported: the function lives beside the tokenizer

__all__ = ["fairseq_lm_key", "load_fairseq_lm", "load_official_units", "lm_state_to_fairseq"]

_LM_RULES = [
    (r"^embed_weight$", "embed.weight"),
    (r"^encoder\.blocks\.(\d+)\.norm1\.(weight|bias)$", r"blocks.\1.ln1.\2"),
    (r"^encoder\.blocks\.(\d+)\.norm2\.(weight|bias)$", r"blocks.\1.ln2.\2"),
    (r"^encoder\.blocks\.(\d+)\.attn\.qkv\.weight$", r"blocks.\1.qkv.weight"),
    (r"^encoder\.blocks\.(\d+)\.attn\.proj\.(weight|bias)$", r"blocks.\1.proj.\2"),
    (r"^encoder\.blocks\.(\d+)\.mlp\.fc1\.(weight|bias)$", r"blocks.\1.fc1.\2"),
    (r"^encoder\.blocks\.(\d+)\.mlp\.fc2\.(weight|bias)$", r"blocks.\1.fc2.\2"),
]


def fairseq_lm_key(key: str) -> str | None:
    """Our ``SyllableLM`` key for an official key (``pe`` is handled separately: it is reshaped)."""
    return rename_key(key, _LM_RULES)


def lm_state_to_fairseq(model: SyllableLM) -> dict:
    """Our state dict in the official layout (used to write test fixtures and to export)."""
    inverse = {}
    for k, v in model.state_dict().items():
        if k == "pos.weight":
            inverse["pe"] = v[None].clone()
            continue
        m = re.match(r"^blocks\.(\d+)\.(ln1|ln2|qkv|proj|fc1|fc2)\.(weight|bias)$", k)
        if k == "embed.weight":
            inverse["embed_weight"] = v.clone()
        elif m:
            i, name, p = m.groups()
            off = {
                "ln1": "norm1",
                "ln2": "norm2",
                "qkv": "attn.qkv",
                "proj": "attn.proj",
                "fc1": "mlp.fc1",
                "fc2": "mlp.fc2",
            }[name]
            inverse[f"encoder.blocks.{i}.{off}.{p}"] = v.clone()
        else:
            raise KeyError(f"no official name for {k}")
    return inverse


def _checkpoint_heads(state: dict, path) -> int:
    """The number of attention heads recorded in a fairseq checkpoint (``cfg.model.num_heads``, or the legacy
    ``args.num_heads``). The weights do not determine it (``qkv`` is ``[3d, d]`` for any head count)."""
    cfg = state.get("cfg")
    model_cfg = cfg.get("model") if isinstance(cfg, dict) else getattr(cfg, "model", None)
    for src in (model_cfg, state.get("args")):
        if src is None:
            continue
        value = src.get("num_heads") if isinstance(src, dict) else getattr(src, "num_heads", None)
        if value is not None:
            return int(value)
    raise ValueError(
        f"{path}: the checkpoint records no head count (no cfg.model.num_heads or args.num_heads); the weights "
        "cannot tell it, so pass heads= explicitly (the official Base config, cluster_alan.yaml, uses 12)"
    )


def load_fairseq_lm(path: str | Path, heads: int | None = None) -> SyllableLM:
    """Build a ``SyllableLM`` from an official fairseq checkpoint file (strict: every key and shape must match).

    The head count comes from the checkpoint's ``cfg.model.num_heads`` (or legacy ``args.num_heads``) unless
    ``heads`` is given; a checkpoint that records neither raises instead of guessing.
    """
    state = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or "model" not in state:
        raise ValueError(f"{path}: expected a fairseq checkpoint dict with a 'model' entry")
    sd = state["model"]
    for key in ("embed_weight", "pe"):
        if key not in sd:
            raise ValueError(f"{path}: missing {key!r}; is this a cluster_alan SyllableLM checkpoint?")
    v1, dim = sd["embed_weight"].shape
    depth = len({int(m.group(1)) for k in sd if (m := re.match(r"^encoder\.blocks\.(\d+)\.", k))})
    heads = _checkpoint_heads(state, path) if heads is None else heads
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or dim % heads:
        raise ValueError(f"{path}: heads must be a positive int dividing the width {dim}, got {heads!r}")
    hidden = sd["encoder.blocks.0.mlp.fc1.weight"].shape[0] if depth else 4 * dim
    cfg = SyllableLMConfig(
        vocab=v1 - 1,
        depth=depth,
        heads=heads,
        dim=dim,
        mlp_ratio=hidden // dim,
        max_pos=sd["pe"].shape[1],
        final_norm=False,
    )
    model = SyllableLM(cfg)
    ours = {}
    for k, v in sd.items():
        if k == "pe":
            ours["pos.weight"] = v.reshape(v.shape[-2], v.shape[-1])
            continue
        nk = fairseq_lm_key(k)
        if nk is None:
            raise KeyError(f"{path}: unexpected key {k!r}")
        ours[nk] = v
    expected = model.state_dict()
    missing = sorted(set(expected) - set(ours))
    if missing:
        raise KeyError(f"{path}: missing keys {missing[:6]}")
    for k, v in ours.items():
        if tuple(v.shape) != tuple(expected[k].shape):
            raise ValueError(f"{path}: {k} has shape {tuple(v.shape)}, expected {tuple(expected[k].shape)}")
    model.load_state_dict({k: v.float() for k, v in ours.items()}, strict=True)
    return model.eval()
