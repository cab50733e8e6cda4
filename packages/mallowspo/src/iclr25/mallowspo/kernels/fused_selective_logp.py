"""Selective log-probability log softmax(logits)[label] with a custom backward (Triton).

Reference: ``fused_selective_logp_reference`` in ``kernels/reference.py``.

Forward: the streaming online-softmax pass of ``kernels/fused_logp_entropy.py`` without the entropy; it saves only the
per-row log-sum-exp (one float per row). Backward: one more streaming pass writes
d logits[v] = g * (1[v == label] - exp(z_v - lse)) directly in the logits' dtype, so no float32 [N, V] softmax is
ever kept for autograd.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from iclr25.shared import next_power_of_2

from .fused_logp_entropy import _MAX_BLOCK_V, launch_logp_entropy

__all__ = ["SelectiveLogpFunction", "selective_logp"]


@triton.jit
def _selective_logp_bwd_kernel(
    grad_out_ptr,
    logits_ptr,
    labels_ptr,
    lse_ptr,
    grad_in_ptr,
    V,
    stride_row,
    stride_grad_row,
    ignore_index,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(labels_ptr + row).to(tl.int64)
    valid = label != ignore_index
    g = tl.load(grad_out_ptr + row).to(tl.float32)
    g = tl.where(valid, g, 0.0)
    lse = tl.load(lse_ptr + row)
    for start in range(0, V, BLOCK_V):
        offs = start + tl.arange(0, BLOCK_V)
        inb = offs < V
        z = tl.load(logits_ptr + row * stride_row + offs, mask=inb, other=float("-inf")).to(tl.float32)
        p = tl.exp(z - lse)
        onehot = tl.where(offs == label, 1.0, 0.0)
        grad = g * (onehot - p)
        tl.store(grad_in_ptr + row * stride_grad_row + offs, grad.to(grad_in_ptr.dtype.element_ty), mask=inb)


class SelectiveLogpFunction(torch.autograd.Function):
    """autograd wrapper: logits [N, V], labels [N] -> log p(label) [N] float32 (0 on ignored rows)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, ignore_index: int):
        logits = logits.contiguous()
        labels = labels.contiguous()
        logp, _, lse = launch_logp_entropy(logits, labels, ignore_index, with_entropy=False)
        ctx.save_for_backward(logits, labels, lse)
        ctx.ignore_index = ignore_index
        return logp

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        logits, labels, lse = ctx.saved_tensors
        n, v = logits.shape
        grad_in = torch.empty_like(logits)
        if n > 0:
            block = min(next_power_of_2(v), _MAX_BLOCK_V)
            _selective_logp_bwd_kernel[(n,)](
                grad_out.contiguous(),
                logits,
                labels,
                lse,
                grad_in,
                v,
                logits.stride(0),
                grad_in.stride(0),
                ctx.ignore_index,
                BLOCK_V=block,
                num_warps=8 if block >= 2048 else 4,
            )
        return grad_in, None, None


def selective_logp(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Differentiable log p(label) per row; same contract as ``fused_selective_logp_reference``."""
    return SelectiveLogpFunction.apply(logits, labels, ignore_index)
