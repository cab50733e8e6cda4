"""Kernel dispatch: ``backend="auto"`` runs Triton on CUDA tensors and the torch reference elsewhere.

Triton modules are imported lazily (only when the Triton path is chosen), so importing the package never imports
triton and the interpreter flag set by the test plugin is honoured.
"""

from __future__ import annotations

import torch

from iclr25.shared import resolve_backend

from .reference import logp_entropy_reference, selective_logp_reference

__all__ = ["logp_entropy", "logp_entropy_reference", "selective_logp", "selective_logp_reference"]


def _validate(logits: torch.Tensor, labels: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError(f"logits must be a floating torch.Tensor [..., V], got {type(logits).__name__}")
    if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.dtype == torch.bool:
        raise TypeError("labels must be an integer torch.Tensor [...]")
    if logits.dim() < 1 or tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"labels shape {tuple(labels.shape)} must equal logits shape without the vocabulary dim "
            f"{tuple(logits.shape[:-1])}"
        )


def logp_entropy(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100, backend: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position (log p(label), entropy in nats) of softmax(logits), float32, shape ``logits.shape[:-1]``.

    No gradient flows (used on the frozen reference model). Positions with ``labels == ignore_index`` give 0.
    """
    _validate(logits, labels)
    if resolve_backend(logits, backend) == "torch":
        with torch.no_grad():
            return logp_entropy_reference(logits, labels, ignore_index)
    from .logp_entropy import logp_entropy as _kernel

    lead = logits.shape[:-1]
    logp, ent = _kernel(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index)
    return logp.view(lead), ent.view(lead)


def selective_logp(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100, backend: str = "auto"
) -> torch.Tensor:
    """Differentiable log softmax(logits)[label], float32, shape ``logits.shape[:-1]``; 0 on ignored positions."""
    _validate(logits, labels)
    if resolve_backend(logits, backend) == "torch":
        return selective_logp_reference(logits, labels, ignore_index)
    from .selective_logp import selective_logp as _kernel

    lead = logits.shape[:-1]
    return _kernel(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index).view(lead)
