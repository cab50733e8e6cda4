"""Kernel dispatch: ``backend="auto"`` runs Triton on CUDA tensors and the torch reference elsewhere.

Triton modules are imported lazily (only when the Triton path is chosen), so importing the package never imports
triton and the interpreter flag set by the test plugin is honoured.
"""

from __future__ import annotations

import torch

from iclr25.shared import resolve_backend

from .reference import fused_logp_entropy_reference, fused_selective_logp_reference

__all__ = ["logp_entropy", "fused_logp_entropy_reference", "selective_logp", "fused_selective_logp_reference"]

# The torch path of ``logp_entropy`` (no gradient) runs the reference on row chunks of at most this many logits,
# so its float32 temporaries stay bounded (3 x 64 MiB) instead of 3 copies of the whole [N, V] tensor.
TORCH_CHUNK_ELEMENTS = 1 << 24


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
    lead = logits.shape[:-1]
    if resolve_backend(logits, backend) == "torch":
        flat, flat_labels = logits.detach().reshape(-1, logits.shape[-1]), labels.reshape(-1)
        rows = max(1, TORCH_CHUNK_ELEMENTS // max(1, logits.shape[-1]))
        with torch.no_grad():
            parts = [
                fused_logp_entropy_reference(flat[i : i + rows], flat_labels[i : i + rows], ignore_index)
                for i in range(0, flat.shape[0], rows)
            ]
        if not parts:
            empty = torch.zeros(lead, dtype=torch.float32, device=logits.device)
            return empty, empty.clone()
        return torch.cat([p[0] for p in parts]).view(lead), torch.cat([p[1] for p in parts]).view(lead)
    from .fused_logp_entropy import logp_entropy as _kernel

    logp, ent = _kernel(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index)
    return logp.view(lead), ent.view(lead)


def selective_logp(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100, backend: str = "auto"
) -> torch.Tensor:
    """Differentiable log softmax(logits)[label], float32, shape ``logits.shape[:-1]``; 0 on ignored positions."""
    _validate(logits, labels)
    if resolve_backend(logits, backend) == "torch":
        return fused_selective_logp_reference(logits, labels, ignore_index)
    from .fused_selective_logp import selective_logp as _kernel

    lead = logits.shape[:-1]
    return _kernel(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index).view(lead)
