"""Finding the decoder blocks and their seven projections in a transformers causal LM (no attention patching)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .config import MODULE_NAMES, PROJECTIONS


@dataclass
class Block:
    """One decoder layer: the layer module and, per projection, its parent module and attribute name."""

    index: int
    layer: nn.Module
    parents: dict[str, tuple[nn.Module, str]]

    def module(self, proj: str) -> nn.Module:
        parent, name = self.parents[proj]
        return getattr(parent, name)


def _layer_list(model: nn.Module) -> nn.ModuleList | None:
    """The ``ModuleList`` of decoder layers: ``model.model.layers`` for Llama/Mistral/Qwen2, else searched."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None) if inner is not None else None
    if isinstance(layers, nn.ModuleList):
        return layers
    if isinstance(getattr(model, "layers", None), nn.ModuleList):
        return model.layers
    for _, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) and all(_has_projections(m) for m in mod):
            return mod
    return None


def _has_projections(layer: nn.Module) -> bool:
    for parent_name, lin_name in MODULE_NAMES.values():
        parent = getattr(layer, parent_name, None)
        if parent is None or getattr(parent, lin_name, None) is None:
            return False
    return True


def find_blocks(model: nn.Module) -> list[Block]:
    """All decoder blocks with their seven projections.

    Raises ``ValueError`` when the model is not a Llama/Mistral/Qwen2-style network (decoder layers with
    ``self_attn.{q,k,v,o}_proj`` and ``mlp.{gate,up,down}_proj``).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    layers = _layer_list(model)
    if layers is None or not len(layers):
        raise ValueError(
            "model has no decoder layers with Llama-style projections: expected model.model.layers[i] with "
            "self_attn.{q,k,v,o}_proj and mlp.{gate,up,down}_proj (Llama, Mistral, Qwen2, ...)"
        )
    blocks = []
    for i, layer in enumerate(layers):
        parents = {}
        for proj in PROJECTIONS:
            parent_name, lin_name = MODULE_NAMES[proj]
            parent = getattr(layer, parent_name, None)
            if parent is None or getattr(parent, lin_name, None) is None:
                raise ValueError(f"decoder layer {i} has no {parent_name}.{lin_name}; TEAL needs all seven projections")
            parents[proj] = (parent, lin_name)
        blocks.append(Block(index=i, layer=layer, parents=parents))
    return blocks


def base_linear(module: nn.Module) -> nn.Linear:
    """The ``nn.Linear`` inside a (possibly TEAL-wrapped) projection."""
    inner = getattr(module, "linear", module)
    if not isinstance(inner, nn.Linear):
        raise ValueError(f"expected an nn.Linear projection, got {type(inner).__name__}")
    return inner


def projection_param_counts(model: nn.Module) -> dict[tuple[int, str], int]:
    """Weight parameter count of every projection, keyed by ``(layer, proj)``."""
    return {(b.index, p): base_linear(b.module(p)).weight.numel() for b in find_blocks(model) for p in PROJECTIONS}


def model_fingerprint(model: nn.Module) -> dict:
    """What a calibration or a threshold file is bound to: layer count, hidden size and every projection's shape.

    ``{"num_layers": L, "hidden_size": d, "projections": {"<layer>.<proj>": [out_features, in_features]}}``
    (JSON-serialisable; identical for a model with or without TEAL applied).
    """
    blocks = find_blocks(model)
    shapes = {}
    for b in blocks:
        for p in PROJECTIONS:
            m = b.module(p)
            shapes[f"{b.index}.{p}"] = [int(m.out_features), int(m.in_features)]
    hidden = getattr(getattr(model, "config", None), "hidden_size", None)
    if hidden is None:
        hidden = shapes["0.q"][1]
    return {"num_layers": len(blocks), "hidden_size": int(hidden), "projections": shapes}


def fingerprint_mismatch(expected: dict, actual: dict) -> str | None:
    """A sentence naming how two fingerprints differ (``None`` when they match)."""
    problems = []
    for key in ("num_layers", "hidden_size"):
        if expected.get(key) != actual.get(key):
            problems.append(f"{key} {expected.get(key)} vs {actual.get(key)} in the model")
    exp_p, act_p = expected.get("projections", {}), actual.get("projections", {})
    for name in sorted(set(exp_p) | set(act_p)):
        a, b = exp_p.get(name), act_p.get(name)
        if (list(a) if a is not None else None) != (list(b) if b is not None else None):
            problems.append(f"projection {name} [out, in] {a} vs {b} in the model")
            if len(problems) >= 4:
                problems.append("...")
                break
    return "; ".join(problems) if problems else None


def check_token_ids(model: nn.Module, ids: torch.Tensor, what: str = "input_ids") -> None:
    """Raise ``ValueError`` when a token id lies outside the model's vocabulary ``[0, vocab_size)``."""
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    vocab = getattr(emb, "num_embeddings", None)
    if ids.numel() == 0:
        raise ValueError(f"{what} is empty")
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or (vocab is not None and hi >= vocab):
        raise ValueError(
            f"{what} holds token ids in [{lo}, {hi}] but the model's vocabulary is [0, {vocab}): "
            "tokenize with the model's own tokenizer"
        )
