"""Segmentation: segment costs, the segmental DP, backtracking and SylBoost's rate control.

Conventions: frames are indexed ``0..N-1``; a segment is ``[a, b)``; ``costs[b, q, k]`` is the cost of the segment
that ends at ``q`` (exclusive) and has ``k`` frames. Borders are a 1-D int64 tensor ``[0, ..., N]``.

Costs:
- k-means SSE (SylBoost, extract_units.py): ``cost(a, b) = (1/D) sum_t ||x_t - mean(x_{a:b})||^2``, computed from
  prefix sums of ``x`` and ``||x||^2`` (``SSE = sum ||x_t||^2 - ||sum x_t||^2 / L``).
- normalized cut (LossPred min-cut): ``I`` = within-segment affinity, ``cut = R + C - 2 I`` with R/C the full row and
  column sums over the segment; ``cost = cut / (cut + I + eps)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ._checks import check_delta, check_quantile
from .config import FRAME_RATE, SegmentConfig, rate_preset
from .kernels import blocksums, segmental_dp

__all__ = [
    "backtrack",
    "calibrate_delta",
    "mincut_segment",
    "ncut_costs",
    "optimal_segmentation",
    "segment_costs_of",
    "select_num_segments",
    "sse_costs",
    "sylboost_segment",
]


def _batch_feats(feats: torch.Tensor, lengths) -> tuple[torch.Tensor, torch.Tensor, bool]:
    if not isinstance(feats, torch.Tensor):
        raise TypeError(f"feats must be a torch.Tensor, got {type(feats).__name__}")
    feats = feats.detach()  # segmentation is not differentiable
    squeeze = feats.ndim == 2
    if squeeze:
        feats = feats.unsqueeze(0)
    if feats.ndim != 3:
        raise ValueError(f"feats must be [N, D] or [B, N, D], got shape {tuple(feats.shape)}")
    if not feats.is_floating_point():
        raise TypeError(f"feats must be floating point, got {feats.dtype}")
    lengths = _lengths(lengths, feats.shape[0], feats.shape[1], feats.device)
    _check_valid_finite(feats, lengths, "feats")
    return feats, lengths, squeeze


def _check_valid_finite(x: torch.Tensor, lengths: torch.Tensor, name: str) -> None:
    """NaN/inf inside the valid length is an error (padding beyond ``lengths`` may hold anything).

    ``x`` is ``[B, N, D]`` features (a frame is bad when any of its dimensions is) or ``[B, N, N]`` affinities.
    """
    live = torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]
    bad = ~torch.isfinite(x)
    if name == "affinity":
        n_bad, what = int((bad & live[:, :, None] & live[:, None, :]).sum()), "entries"
    else:
        n_bad, what = int((bad.any(-1) & live).sum()), "frames"
    if n_bad:
        raise ValueError(
            f"{name} holds NaN or infinite values ({n_bad} {what} inside the valid length); expected finite"
        )


def _lengths(lengths, bsz: int, n: int, device) -> torch.Tensor:
    if lengths is None:
        return torch.full((bsz,), n, dtype=torch.long, device=device)
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=device).reshape(-1)
    if lengths.numel() != bsz:
        raise ValueError(f"lengths has {lengths.numel()} entries for a batch of {bsz}")
    if (lengths < 0).any() or (lengths > n).any():
        raise ValueError(f"lengths must lie in [0, {n}], got {lengths.tolist()}")
    return lengths


def _mask_invalid(costs: torch.Tensor, lengths: torch.Tensor, min_len: int) -> torch.Tensor:
    """Set ``inf`` where k < min_len, k > q, or the segment runs past the utterance's length."""
    _, n1, s1 = costs.shape
    q = torch.arange(n1, device=costs.device).view(1, n1, 1)
    k = torch.arange(s1, device=costs.device).view(1, 1, s1)
    bad = (k < max(min_len, 1)) | (k > q) | (q > lengths.view(-1, 1, 1))
    return costs.masked_fill(bad, float("inf"))


def sse_costs(
    feats: torch.Tensor, max_len: int = 35, min_len: int = 3, lengths=None, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """k-means SSE cost per frame-dimension of every segment: ``[B, N + 1, max_len + 1]`` (inf where not allowed)."""
    x, lengths, _ = _batch_feats(feats, lengths)
    bsz, n, d = x.shape
    x = x.to(dtype)
    cs = torch.zeros(bsz, n + 1, d, dtype=dtype, device=x.device)
    cs[:, 1:] = x.cumsum(1)
    sq = torch.zeros(bsz, n + 1, dtype=dtype, device=x.device)
    sq[:, 1:] = x.pow(2).sum(-1).cumsum(1)
    costs = torch.zeros(bsz, n + 1, max_len + 1, dtype=dtype, device=x.device)
    for k in range(1, min(max_len, n) + 1):
        seg = cs[:, k:] - cs[:, :-k]
        costs[:, k:, k] = ((sq[:, k:] - sq[:, :-k]) - seg.pow(2).sum(-1) / k).clamp(min=0.0) / d
    return _mask_invalid(costs, lengths, min_len)


def ncut_costs(
    affinity: torch.Tensor,
    max_len: int = 49,
    min_len: int = 1,
    eps: float = 1e-5,
    lengths=None,
    backend: str = "auto",
) -> torch.Tensor:
    """Normalized-cut cost of every segment of an affinity matrix ``[N, N]`` or ``[B, N, N]``."""
    if not isinstance(affinity, torch.Tensor):
        raise TypeError(f"affinity must be a torch.Tensor, got {type(affinity).__name__}")
    a = (affinity.unsqueeze(0) if affinity.ndim == 2 else affinity).detach()
    if a.ndim != 3 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"affinity must be [N, N] or [B, N, N], got shape {tuple(affinity.shape)}")
    bsz, n, _ = a.shape
    lengths = _lengths(lengths, bsz, n, a.device)
    _check_valid_finite(a, lengths, "affinity")
    live = torch.arange(n, device=a.device)[None, :] < lengths[:, None]
    a = a.double() * (live[:, :, None] & live[:, None, :])
    within = blocksums(a, max_len, backend=backend).double()  # I(S)
    rows = torch.zeros(bsz, n + 1, dtype=torch.float64, device=a.device)
    cols = torch.zeros_like(rows)
    rows[:, 1:] = a.sum(2).cumsum(1)
    cols[:, 1:] = a.sum(1).cumsum(1)
    rc = torch.zeros_like(within)
    for k in range(1, min(max_len, n) + 1):
        rc[:, k:, k] = (rows[:, k:] - rows[:, :-k]) + (cols[:, k:] - cols[:, :-k])
    cut = (rc - 2.0 * within).clamp(min=0.0)
    costs = cut / (cut + within + eps)
    return _mask_invalid(costs, lengths, min_len)


def segment_costs_of(costs: torch.Tensor, borders: torch.Tensor) -> torch.Tensor:
    """Per-segment costs ``costs[q, k]`` along one border sequence (costs: ``[N + 1, S + 1]``)."""
    b = torch.as_tensor(borders, dtype=torch.long)
    return costs[b[1:], b[1:] - b[:-1]]


def _backtrack_np(back: np.ndarray, num_segments: int, n: int) -> list[int]:
    borders = [int(n)]
    q, j = int(n), int(num_segments)
    while q > 0:
        k = int(back[j, q]) if j > 0 else 0
        if k <= 0:
            raise ValueError(f"no segmentation of {n} frames into {num_segments} segments under these constraints")
        q -= k
        j -= 1
        borders.append(q)
    return borders[::-1]


def backtrack(back: torch.Tensor, num_segments: int, n: int) -> torch.Tensor:
    """Follow back-pointers ``back [J + 1, N + 1]`` from ``(num_segments, n)`` to frame 0; returns borders."""
    back_np = back.detach().cpu().numpy() if isinstance(back, torch.Tensor) else np.asarray(back)
    return torch.tensor(_backtrack_np(back_np, num_segments, n), dtype=torch.long)


def _feasible_range(n: int, min_len: int, max_len: int) -> tuple[int, int]:
    return max(1, math.ceil(n / max_len)), max(1, n // max(min_len, 1))


def _select_np(costs: np.ndarray, back: np.ndarray, n: int, delta: float, quantile: float, lo: int, hi: int) -> int:
    best = lo
    while lo <= hi:
        mid = (lo + hi) // 2
        b = np.asarray(_backtrack_np(back, mid, n))
        k = b[1:] - b[:-1]
        qcost = float(np.quantile(costs[b[1:], k] / k, quantile))
        if qcost > delta:
            best = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return best


def select_num_segments(
    costs: torch.Tensor,
    back: torch.Tensor,
    n: int,
    delta: float,
    quantile: float = 0.75,
    max_segments=None,
    min_segments=None,
) -> int:
    """Official rate control (extract_units.py get_quantile_borders_helper).

    Binary search over the segment budget ``m'`` in ``[m // 3, m]`` (at-most-m' DP): backtrack, take the per-frame
    cost ``cost_i / len_i`` of every segment and its ``quantile``; if it is above ``delta`` the budget can grow
    (``best = m'``, search higher), otherwise search lower. Returns the largest ``m'`` whose quantile exceeds delta
    (or the lower end of the range when none does). costs: ``[N + 1, S + 1]``, back: ``[J + 1, N + 1]``.
    """
    quantile, delta = check_quantile(quantile), check_delta(delta)
    hi = back.shape[0] - 1 if max_segments is None else int(max_segments)
    lo = max(hi // 3 if min_segments is None else int(min_segments), 1)
    return _select_np(costs.detach().cpu().double().numpy(), back.detach().cpu().numpy(), n, delta, quantile, lo, hi)


def _single(n: int) -> torch.Tensor:
    return torch.tensor([0, int(n)], dtype=torch.long)


@dataclass
class _Prepared:
    """DP tables of one utterance for the rate control (independent of delta)."""

    n: int
    lo: int = 0
    hi: int = 0
    costs: np.ndarray | None = None
    back: np.ndarray | None = None

    def borders(self, delta: float, quantile: float) -> torch.Tensor:
        if self.costs is None:
            return _single(self.n)
        best = _select_np(self.costs, self.back, self.n, delta, quantile, self.lo, self.hi)
        return torch.tensor(_backtrack_np(self.back, best, self.n), dtype=torch.long)


def _prepare(x, lens, max_len, min_len, max_rate_hz, frame_rate, backend) -> list[_Prepared]:
    if min_len < 1 or max_len < min_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    lens_l = [int(n) for n in lens.tolist()]
    out = [_Prepared(n) for n in lens_l]
    todo = [i for i, n in enumerate(lens_l) if n >= 2 * min_len]
    if not todo:
        return out
    s = min(max_len, max(lens_l[i] for i in todo))
    budgets = {
        i: max(int(lens_l[i] * max_rate_hz / frame_rate), _feasible_range(lens_l[i], min_len, s)[0]) for i in todo
    }
    costs = sse_costs(x[todo], max_len=s, min_len=min_len, lengths=lens[todo])
    _, back = segmental_dp(costs, max(budgets.values()), exact=False, backend=backend)
    costs_np, back_np = costs.cpu().double().numpy(), back.cpu().numpy()
    for row, i in enumerate(todo):
        m = budgets[i]
        lo = max(m // 3, _feasible_range(lens_l[i], min_len, s)[0])
        out[i] = _Prepared(lens_l[i], lo, max(m, lo), costs_np[row], back_np[row])
    return out


def sylboost_segment(
    feats: torch.Tensor,
    rate: str | None = "6.25hz",
    delta: float | None = None,
    quantile: float | None = None,
    max_len: int = SegmentConfig.max_len,
    min_len: int = SegmentConfig.min_len,
    max_rate_hz: float = SegmentConfig.max_rate_hz,
    frame_rate: float = FRAME_RATE,
    lengths=None,
    backend: str = "auto",
):
    """SylBoost's efficient extraction with the official rate control.

    feats: ``[N, D]`` (returns borders) or ``[B, N, D]`` with optional ``lengths`` (returns a list of borders).
    ``rate`` picks the official delta/quantile preset ('8.33hz', '6.25hz', '5.0hz'); an explicit ``delta`` overrides
    it. The DP allows at most ``m = int(N * max_rate_hz / frame_rate)`` segments of ``min_len..max_len`` frames.
    Inputs shorter than two minimum segments give the single segment ``[0, N]`` (never a zero-length segment).
    """
    x, lens, squeeze = _batch_feats(feats, lengths)
    if delta is None:
        if rate is None:
            raise ValueError("give either rate= (e.g. '6.25hz') or delta=")
        preset = rate_preset(rate)
        delta = preset["delta"]
        quantile = preset["quantile"] if quantile is None else quantile
    quantile = check_quantile(SegmentConfig.quantile if quantile is None else quantile)
    delta = check_delta(delta)
    prepared = _prepare(x, lens, max_len, min_len, max_rate_hz, frame_rate, backend)
    out = [p.borders(delta, quantile) for p in prepared]
    return out[0] if squeeze else out


def _exact_k(costs: torch.Tensor, n: int, num_segments: int, min_len: int, max_len: int, backend: str):
    lo, hi = _feasible_range(n, min_len, max_len)
    k = min(max(int(num_segments), lo), hi)
    _, back = segmental_dp(costs, k, exact=True, backend=backend)
    return backtrack(back[0], k, n)


def _check_k(num_segments) -> int:
    if isinstance(num_segments, bool) or not isinstance(num_segments, (int, np.integer)):
        raise TypeError(f"num_segments must be an int, got {type(num_segments).__name__}")
    if num_segments < 1:
        raise ValueError(f"num_segments must be >= 1, got {num_segments}")
    return int(num_segments)


def optimal_segmentation(
    feats: torch.Tensor, num_segments: int, min_len: int = 3, max_len: int = 35, backend: str = "auto"
) -> torch.Tensor:
    """Exactly-K segmentation of ``feats [N, D]`` minimising the total k-means SSE cost.

    K is clamped to the feasible range ``[ceil(N / max_len), floor(N / min_len)]``; ``N < min_len`` gives one
    segment.
    """
    k = _check_k(num_segments)
    x, _, squeeze = _batch_feats(feats, None)
    if not squeeze:
        raise ValueError("optimal_segmentation takes one utterance [N, D]; loop over a batch")
    n = x.shape[1]
    if n < min_len or n == 0:
        return _single(n)
    s = min(max_len, n)
    return _exact_k(sse_costs(x, s, min_len), n, k, min_len, s, backend)


def mincut_segment(
    affinity: torch.Tensor,
    num_segments: int,
    min_len: int = 1,
    max_len: int = 49,
    eps: float = 1e-5,
    backend: str = "auto",
) -> torch.Tensor:
    """Exactly-K normalized-cut segmentation of an affinity matrix ``[N, N]`` (LossPred's min-cut)."""
    k = _check_k(num_segments)
    if not isinstance(affinity, torch.Tensor) or affinity.ndim != 2:
        raise ValueError("affinity must be a 2-D torch.Tensor [N, N]")
    n = affinity.shape[0]
    if n < min_len or n == 0:
        return _single(n)
    s = min(max_len, n)
    costs = ncut_costs(affinity, max_len=s, min_len=min_len, eps=eps, backend=backend)
    return _exact_k(costs, n, k, min_len, s, backend)


def calibrate_delta(
    feats_list,
    target_hz: float,
    quantile: float = 0.75,
    max_len: int = 35,
    min_len: int = 3,
    max_rate_hz: float = SegmentConfig.max_rate_hz,
    frame_rate: float = FRAME_RATE,
    lo: float = 1e-6,
    hi: float = 10.0,
    iters: int = 30,
) -> float:
    """Find the delta whose rate control gives ``target_hz`` segments per second on ``feats_list`` (bisection in
    log-delta; the DP runs once per utterance). The official deltas are tied to the released checkpoints' feature
    scale; a new encoder needs its own.
    """
    if not target_hz > 0:
        raise ValueError(f"target_hz must be > 0, got {target_hz}")
    quantile = check_quantile(quantile)
    prepared = []
    for f in feats_list:
        x, lens, _ = _batch_feats(f, None)
        prepared += _prepare(x, lens, max_len, min_len, max_rate_hz, frame_rate, "auto")
    total = sum(p.n for p in prepared) / frame_rate
    if total <= 0:
        raise ValueError("feats_list holds no frames")

    def rate(delta: float) -> float:
        return sum(len(p.borders(delta, quantile)) - 1 for p in prepared) / total

    a, b = math.log(lo), math.log(hi)
    for _ in range(iters):
        mid = (a + b) / 2
        if rate(math.exp(mid)) > target_hz:
            a = mid
        else:
            b = mid
    return math.exp((a + b) / 2)
