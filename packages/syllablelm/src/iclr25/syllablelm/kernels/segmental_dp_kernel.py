"""Triton segmental DP: one program per utterance loops over the segment count in-kernel.

Reference: ``segmental_dp_reference`` in ``kernels/reference.py`` (same recurrence, same tie rule: the smallest
segment length wins ties because k is scanned upwards with a strict ``<``). The DP table lives in global memory;
``tl.debug_barrier()`` orders row j-1's stores before row j's loads within the program.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from iclr25.shared import next_power_of_2


@triton.jit
def _segmental_dp_kernel(costs_ptr, total_ptr, back_ptr, N1, S1, J, EXACT: tl.constexpr, BLOCK_Q: tl.constexpr):
    b = tl.program_id(0)
    costs_b = costs_ptr + b * N1 * S1
    total_b = total_ptr + b * (J + 1) * N1
    back_b = back_ptr + b * (J + 1) * N1
    for j in range(1, J + 1):
        for q0 in range(0, N1, BLOCK_Q):
            q = q0 + tl.arange(0, BLOCK_Q)
            qm = q < N1
            best = tl.full([BLOCK_Q], float("inf"), costs_ptr.dtype.element_ty)
            arg = tl.zeros([BLOCK_Q], dtype=tl.int32)
            for k in range(1, S1):
                src = q - k
                valid = qm & (src >= 0)
                prev = tl.load(total_b + (j - 1) * N1 + src, mask=valid, other=float("inf"))
                c = tl.load(costs_b + q * S1 + k, mask=valid, other=float("inf"))
                cand = prev + c
                better = cand < best
                best = tl.where(better, cand, best)
                arg = tl.where(better, k, arg)
            arg = tl.where(best < float("inf"), arg, 0)
            arg = tl.where(q == 0, 0, arg)
            if not EXACT:
                best = tl.where(q == 0, 0.0, best)
            tl.store(total_b + j * N1 + q, best, mask=qm)
            tl.store(back_b + j * N1 + q, arg, mask=qm)
        tl.debug_barrier()


def segmental_dp_triton(costs: torch.Tensor, num_segments: int, exact: bool = True):
    costs = costs.contiguous()
    bsz, n1, s1 = costs.shape
    total = torch.full((bsz, num_segments + 1, n1), float("inf"), dtype=costs.dtype, device=costs.device)
    back = torch.zeros(bsz, num_segments + 1, n1, dtype=torch.int32, device=costs.device)
    total[:, 0, 0] = 0.0
    if not exact:
        total[:, :, 0] = 0.0
    if num_segments > 0 and bsz > 0:
        block = min(next_power_of_2(n1), 1024)
        _segmental_dp_kernel[(bsz,)](costs, total, back, n1, s1, num_segments, EXACT=bool(exact), BLOCK_Q=block)
    return total, back
