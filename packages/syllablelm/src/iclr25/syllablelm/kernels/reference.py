"""Pure-torch references of the Triton kernels. Never imports triton; reads like the math.

- ``blocksums_reference``: diagonal-block sums of a square matrix for every segment of length <= max_len.
- ``segmental_dp_reference``: the segmental min-plus dynamic program (exact-K or at-most-K).
- ``kmeans_assign_reference``: nearest centroid under squared L2, ties to the lowest index.
"""

from __future__ import annotations

import torch


def blocksums_reference(m: torch.Tensor, max_len: int) -> torch.Tensor:
    """``out[b, q, k] = sum(m[b, q-k:q, q-k:q])`` for ``1 <= k <= min(q, max_len)``; 0 elsewhere.

    m: ``[B, N, N]``. Returns ``[B, N + 1, max_len + 1]`` in m's dtype. Computed with a 2-D prefix sum in float64:
    ``block(a, b) = P[b, b] - P[a, b] - P[b, a] + P[a, a]`` with ``P[i, j] = sum(m[:i, :j])``.
    """
    bsz, n, _ = m.shape
    p = torch.zeros(bsz, n + 1, n + 1, dtype=torch.float64, device=m.device)
    p[:, 1:, 1:] = m.double().cumsum(1).cumsum(2)
    out = torch.zeros(bsz, n + 1, max_len + 1, dtype=torch.float64, device=m.device)
    q = torch.arange(n + 1, device=m.device)
    for k in range(1, max_len + 1):
        qq = q[k:]
        a = qq - k
        out[:, k:, k] = p[:, qq, qq] - p[:, a, qq] - p[:, qq, a] + p[:, a, a]
    return out.to(m.dtype)


def segmental_dp_reference(
    costs: torch.Tensor, num_segments: int, exact: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Segmental DP over per-segment costs.

    costs: ``[B, N + 1, S + 1]`` with ``costs[b, q, k]`` the cost of the segment ``[q - k, q)`` (``inf`` when not
    allowed). Returns ``total [B, J + 1, N + 1]`` and ``back [B, J + 1, N + 1]`` (int32) with ``J = num_segments``:

    - exact: ``total[j, q]`` = min cost of splitting ``[0, q)`` into exactly ``j`` segments;
    - at-most (official SylBoost semantics, ``total[j - 1, 0] = 0`` for all j): into at most ``j`` segments.

    ``total[j, q] = min_k total[j - 1, q - k] + costs[q, k]``; ``back[j, q]`` is the minimising ``k`` (the smallest
    one on ties; 0 where infeasible). Arithmetic is in the dtype of ``costs``.
    """
    bsz, n1, s1 = costs.shape
    dev = costs.device
    inf = torch.tensor(float("inf"), dtype=costs.dtype, device=dev)
    total = torch.full((bsz, num_segments + 1, n1), float("inf"), dtype=costs.dtype, device=dev)
    back = torch.zeros(bsz, num_segments + 1, n1, dtype=torch.int32, device=dev)
    total[:, 0, 0] = 0.0
    if not exact:
        total[:, :, 0] = 0.0
    q = torch.arange(n1, device=dev).view(n1, 1)
    k = torch.arange(s1, device=dev).view(1, s1)
    src = q - k  # [N+1, S+1] start frame of the segment
    valid = (src >= 0) & (k >= 1)
    src = src.clamp(min=0)
    for j in range(1, num_segments + 1):
        prev = total[:, j - 1]  # [B, N+1]
        cand = prev[:, src] + costs  # [B, N+1, S+1]
        cand = torch.where(valid, cand, inf)
        best, arg = cand.min(dim=2)  # first index on ties
        feasible = torch.isfinite(best)
        row = torch.where(feasible, best, inf)
        if not exact:
            row[:, 0] = 0.0
        total[:, j] = row
        back[:, j] = torch.where(feasible, arg, 0).to(torch.int32)
        back[:, j, 0] = 0
    return total, back


def kmeans_assign_reference(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """``argmin_k ||x_i - c_k||^2`` computed as ``||x||^2 - 2 x c^T + ||c||^2`` (the official ApplyKmeans formula).

    x: ``[N, D]``, centroids: ``[K, D]``. Returns int64 ``[N]``; ties go to the lowest index.
    """
    xf = x.float()
    cf = centroids.float()
    dist = xf.pow(2).sum(-1, keepdim=True) - 2.0 * xf @ cf.T + cf.pow(2).sum(-1)[None, :]
    return dist.argmin(dim=1)


# Each Triton module kernels/<name>.py has its reference <name>_reference (repo convention).
blocksums_kernel_reference = blocksums_reference
segmental_dp_kernel_reference = segmental_dp_reference
kmeans_assign_kernel_reference = kmeans_assign_reference
