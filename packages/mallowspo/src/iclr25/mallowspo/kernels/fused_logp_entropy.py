"""Fused per-token log-probability + full-vocabulary entropy in one streaming pass (Triton).

Reference: ``fused_logp_entropy_reference`` in ``kernels/reference.py``.

One program per row streams the vocabulary in blocks of ``BLOCK_V`` and keeps three running scalars (online
softmax): the max ``m``, ``s = sum exp(z - m)`` and ``t = sum exp(z - m) (z - m)``. When the max grows from m to m',
s <- s e^(m-m') and t <- e^(m-m') (t + (m - m') s). At the end

    lse = m + log s,    log p(label) = z_label - lse,    H = log s - t / s.

Nothing of size [N, V] is allocated: the kernel reads the logits once (any float dtype, upcast to float32 in
registers) and writes three floats per row. -inf logits contribute exactly 0. The outputs carry no gradient (this is
the reference-model path of MallowsPO); the differentiable policy path is ``kernels/fused_selective_logp.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from iclr25.shared import next_power_of_2

__all__ = ["launch_logp_entropy", "logp_entropy"]

_MAX_BLOCK_V = 4096


@triton.jit
def _logp_entropy_fwd_kernel(
    logits_ptr,
    labels_ptr,
    logp_ptr,
    ent_ptr,
    lse_ptr,
    V,
    stride_row,
    ignore_index,
    BLOCK_V: tl.constexpr,
    WITH_ENTROPY: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride_row
    label = tl.load(labels_ptr + row).to(tl.int64)
    neg_inf = float("-inf")
    m = tl.zeros([], dtype=tl.float32) + neg_inf
    s = tl.zeros([], dtype=tl.float32)
    t = tl.zeros([], dtype=tl.float32)
    for start in range(0, V, BLOCK_V):
        offs = start + tl.arange(0, BLOCK_V)
        z = tl.load(base + offs, mask=offs < V, other=neg_inf).to(tl.float32)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        m_safe = tl.where(m_new == neg_inf, 0.0, m_new)
        alpha = tl.exp(m - m_safe)
        e = tl.exp(z - m_safe)
        if WITH_ENTROPY:
            shift = tl.where(s > 0, m - m_safe, 0.0)
            zc = tl.where(z == neg_inf, 0.0, z - m_safe)
            t = alpha * (t + shift * s) + tl.sum(e * zc, axis=0)
        s = s * alpha + tl.sum(e, axis=0)
        m = m_new
    m_fin = tl.where(m == neg_inf, 0.0, m)
    log_s = tl.log(s)
    lse = m_fin + log_s
    valid = label != ignore_index
    z_label = tl.load(base + tl.where(valid, label, 0)).to(tl.float32)
    tl.store(logp_ptr + row, tl.where(valid, z_label - lse, 0.0))
    tl.store(lse_ptr + row, lse)
    if WITH_ENTROPY:
        tl.store(ent_ptr + row, tl.where(valid, log_s - t / s, 0.0))


def _check(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int) -> None:
    if logits.dim() != 2 or labels.dim() != 1 or labels.shape[0] != logits.shape[0]:
        raise ValueError(f"expected logits [N, V] and labels [N], got {tuple(logits.shape)} and {tuple(labels.shape)}")
    valid = labels != ignore_index
    if bool(((labels < 0) | (labels >= logits.shape[1]))[valid].any()):
        raise ValueError(f"labels must lie in [0, {logits.shape[1]}) or equal ignore_index={ignore_index}")


def launch_logp_entropy(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100, with_entropy: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run the kernel on logits [N, V] (row-contiguous) and labels [N]; returns (logp, entropy, lse) in float32."""
    _check(logits, labels, ignore_index)
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    labels = labels.contiguous()
    n, v = logits.shape
    logp = torch.empty(n, dtype=torch.float32, device=logits.device)
    lse = torch.empty(n, dtype=torch.float32, device=logits.device)
    ent = torch.empty(n, dtype=torch.float32, device=logits.device) if with_entropy else lse
    if n == 0:
        return logp, ent, lse
    block = min(next_power_of_2(v), _MAX_BLOCK_V)
    _logp_entropy_fwd_kernel[(n,)](
        logits,
        labels,
        logp,
        ent,
        lse,
        v,
        logits.stride(0),
        ignore_index,
        BLOCK_V=block,
        WITH_ENTROPY=with_entropy,
        num_warps=8 if block >= 2048 else 4,
    )
    return logp, ent, lse


def logp_entropy(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(label), entropy) per row, float32, no gradient. Same contract as ``fused_logp_entropy_reference``."""
    with torch.no_grad():
        logp, ent, _ = launch_logp_entropy(logits.detach(), labels, ignore_index, with_entropy=True)
    return logp, ent
