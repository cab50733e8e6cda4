"""Triton diagonal-block sums: ``out[b, q, k] = sum(m[b, q-k:q, q-k:q])`` for k = 1..max_len.

One program per (utterance, segment end q). Growing the segment leftwards by one frame ``a = q - k`` adds row
``m[a, a:q]`` and column ``m[a+1:q, a]``; the program accumulates these increments (O(S^2) work per q, only the
band is read). Reference: ``blocksums_reference`` in ``kernels/reference.py`` (2-D prefix sums). The op is linear;
its backward uses the reference's adjoint.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from iclr25.shared import next_power_of_2

from .reference import blocksums_reference


@triton.jit
def _blocksums_kernel(m_ptr, out_ptr, N, S, stride_b, stride_r, stride_c, BLOCK_S: tl.constexpr):
    b = tl.program_id(0)
    q = tl.program_id(1) + 1
    base = m_ptr + b * stride_b
    offs = tl.arange(0, BLOCK_S)
    acc = tl.zeros([BLOCK_S], dtype=m_ptr.dtype.element_ty)
    kmax = tl.minimum(q, S)
    for k in range(1, kmax + 1):
        a = q - k
        t = a + offs
        row = tl.load(base + a * stride_r + t * stride_c, mask=t < q, other=0.0)
        col = tl.load(base + t * stride_r + a * stride_c, mask=(t > a) & (t < q), other=0.0)
        acc += row + col
        tl.store(out_ptr + (b * (N + 1) + q) * (S + 1) + k, tl.sum(acc, axis=0))


def _forward(m: torch.Tensor, max_len: int) -> torch.Tensor:
    bsz, n, _ = m.shape
    out = torch.zeros(bsz, n + 1, max_len + 1, dtype=m.dtype, device=m.device)
    if n > 0 and bsz > 0:
        _blocksums_kernel[(bsz, n)](
            m, out, n, max_len, m.stride(0), m.stride(1), m.stride(2), BLOCK_S=next_power_of_2(max_len)
        )
    return out


class _BlockSums(torch.autograd.Function):
    @staticmethod
    def forward(ctx, m, max_len):
        ctx.max_len = max_len
        ctx.shape, ctx.dtype = m.shape, m.dtype
        return _forward(m, max_len)

    @staticmethod
    def backward(ctx, grad):
        zeros = torch.zeros(ctx.shape, dtype=ctx.dtype, device=grad.device, requires_grad=True)
        with torch.enable_grad():
            out = blocksums_reference(zeros, ctx.max_len)
        (gm,) = torch.autograd.grad(out, zeros, grad)
        return gm, None


def blocksums_triton(m: torch.Tensor, max_len: int) -> torch.Tensor:
    return _BlockSums.apply(m, max_len)
