"""Syllable units: segment pooling, k-means, Ward merging of centroids, deduplication and the tokenizer.

Official pipeline (extract_units.py SylBoostFeatureReader.forward): mean over ``[start + 1, end - 1)`` (one edge
frame trimmed each side), standardise each pooled vector over its channels (mean, unbiased std), nearest k-means
centroid, map through the agglomerative table ``agglom[kmeans_id]``, deduplicate consecutive repeats (merging times).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .kernels import kmeans_assign

__all__ = ["KMeans", "deduplicate", "pool_segments", "ward_merge"]


def pool_segments(feats: torch.Tensor, borders, trim: int = 1, standardize: bool = True) -> torch.Tensor:
    """Mean features of each segment ``[b_i, b_{i+1})`` over ``[b_i + trim, b_{i+1} - trim)``.

    Segments too short to trim (fewer than ``2 * trim + 1`` frames) are averaged over all their frames, so no
    segment ever pools zero frames (the official code returns NaN there). Returns ``[num_segments, D]``.
    """
    if feats.ndim != 2:
        raise ValueError(f"feats must be [N, D], got shape {tuple(feats.shape)}")
    b = torch.as_tensor(borders, dtype=torch.long).reshape(-1).tolist()
    if len(b) < 2 or b[0] != 0 or b[-1] > feats.shape[0] or any(e <= s for s, e in zip(b[:-1], b[1:])):
        raise ValueError(f"borders must increase strictly from 0 to at most N={feats.shape[0]}, got {b}")
    pooled = []
    for s, e in zip(b[:-1], b[1:]):
        if e - s > 2 * trim:
            s, e = s + trim, e - trim
        pooled.append(feats[s:e].float().mean(0))
    out = torch.stack(pooled)
    if standardize:
        std = out.std(dim=-1, keepdim=True) if out.shape[-1] > 1 else torch.ones_like(out[:, :1])
        out = (out - out.mean(dim=-1, keepdim=True)) / std.clamp(min=1e-8)
    return out


class KMeans:
    """k-means with k-means++ initialisation and Lloyd iterations; assignment through the fused kernel dispatch.

    Empty clusters are re-seeded with the point farthest from its centroid. Deterministic given ``seed``.
    """

    def __init__(self, n_clusters: int, n_iter: int = 50, seed: int = 0, tol: float = 1e-6, backend: str = "auto"):
        if n_clusters < 1:
            raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
        self.n_clusters = int(n_clusters)
        self.n_iter = int(n_iter)
        self.seed = seed
        self.tol = tol
        self.backend = backend
        self.centroids: torch.Tensor | None = None
        self.inertia_: float = float("nan")

    def _init_pp(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        n = x.shape[0]
        idx = [int(torch.randint(n, (1,), generator=gen))]
        d2 = (x - x[idx[0]]).pow(2).sum(1)
        for _ in range(1, self.n_clusters):
            total = d2.sum()
            if total <= 0:
                nxt = int(torch.randint(n, (1,), generator=gen))
            else:
                nxt = int(torch.multinomial(d2 / total, 1, generator=gen))
            idx.append(nxt)
            d2 = torch.minimum(d2, (x - x[nxt]).pow(2).sum(1))
        return x[idx].clone()

    def fit(self, x) -> KMeans:
        x = torch.as_tensor(x).float()
        if x.ndim != 2:
            raise ValueError(f"x must be [N, D], got shape {tuple(x.shape)}")
        if x.shape[0] < self.n_clusters:
            raise ValueError(f"need at least n_clusters={self.n_clusters} points, got {x.shape[0]}")
        gen = torch.Generator().manual_seed(self.seed)
        c = self._init_pp(x, gen)
        prev = float("inf")
        for _ in range(self.n_iter):
            a = kmeans_assign(x, c, backend=self.backend)
            sums = torch.zeros_like(c).index_add_(0, a, x)
            cnt = torch.bincount(a, minlength=self.n_clusters).float()
            empty = cnt == 0
            c = torch.where(empty[:, None], c, sums / cnt.clamp(min=1)[:, None])
            dist = (x - c[a]).pow(2).sum(1)
            if empty.any():
                far = torch.argsort(dist, descending=True)[: int(empty.sum())]
                c[empty] = x[far]
            inertia = float(dist.sum())
            if prev - inertia <= self.tol * max(abs(prev), 1.0):
                break
            prev = inertia
        self.centroids = c
        self.inertia_ = float((x - c[kmeans_assign(x, c, backend=self.backend)]).pow(2).sum())
        return self

    def predict(self, x) -> torch.Tensor:
        if self.centroids is None:
            raise ValueError("KMeans.predict called before fit (or set .centroids)")
        return kmeans_assign(torch.as_tensor(x).float(), self.centroids, backend=self.backend)


def ward_merge(centroids, n_units: int) -> np.ndarray:
    """Ward agglomerative clustering of centroids into ``n_units`` groups: returns ``agglom[kmeans_id]`` in
    ``0..n_units-1`` (scipy linkage; O(K^2) memory in the number of centroids)."""
    from scipy.cluster.hierarchy import fcluster, linkage

    c = np.asarray(torch.as_tensor(centroids).double().cpu().numpy())
    k = c.shape[0]
    if not 1 <= n_units <= k:
        raise ValueError(f"n_units must lie in [1, {k}], got {n_units}")
    if n_units == k:
        return np.arange(k, dtype=np.int64)
    z = linkage(c, method="ward")
    labels = fcluster(z, t=n_units, criterion="maxclust")
    _, dense = np.unique(labels, return_inverse=True)
    return dense.astype(np.int64)


@dataclass
class Units:
    """Deduplicated units with their frame spans ``[start, end)`` at 50 Hz."""

    units: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def seconds(self, frame_rate: float = 50.0) -> list[tuple[int, float, float]]:
        return [(int(u), s / frame_rate, e / frame_rate) for u, s, e in zip(self.units, self.starts, self.ends)]

    def __len__(self) -> int:
        return len(self.units)


def deduplicate(units, starts, ends) -> Units:
    """Merge consecutive repeats of a unit into one span (start of the first, end of the last)."""
    u = np.asarray(units).reshape(-1)
    s = np.asarray(starts).reshape(-1)
    e = np.asarray(ends).reshape(-1)
    if not len(u) == len(s) == len(e):
        raise ValueError("units, starts and ends must have the same length")
    if len(u) == 0:
        return Units(u, s, e)
    first = np.ones(len(u), dtype=bool)
    first[1:] = u[1:] != u[:-1]
    last = np.ones(len(u), dtype=bool)
    last[:-1] = u[1:] != u[:-1]
    return Units(u[first], s[first], e[last])
