"""``SylBoostTokenizer``: waveform -> deduplicated syllable units with their frame spans.

encoder features -> SylBoost segmentation (official rate control) -> segment pooling (trim 1 frame, standardise) ->
nearest k-means centroid -> agglomerative map -> deduplication.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from iclr25.shared import atomic_write

from ._checks import check_delta, check_quantile, check_waveform
from .config import FRAME_RATE, SegmentConfig, rate_preset
from .segment import calibrate_delta, sylboost_segment
from .units import KMeans, Units, deduplicate, pool_segments, ward_merge

__all__ = ["SylBoostTokenizer", "load_official_units"]

Encoder = Callable[[torch.Tensor], torch.Tensor]


class SylBoostTokenizer:
    """Turn waveforms into ``Units(units, starts, ends)`` (frames at 50 Hz).

    ``encoder(wav [S]) -> feats [T, D]``; ``centroids [K, D]`` k-means centroids of standardised pooled segments;
    ``agglom [K]`` maps k-means ids to units (identity when None). ``rate`` selects the official delta/quantile; an
    explicit ``delta`` (e.g. from ``calibrate_delta`` for a non-official encoder) overrides it.
    """

    def __init__(
        self,
        encoder: Encoder,
        centroids,
        agglom=None,
        rate: str | None = "6.25hz",
        delta: float | None = None,
        quantile: float | None = None,
        seg: SegmentConfig | None = None,
        backend: str = "auto",
    ):
        self.encoder = encoder
        self.kmeans = KMeans(int(np.asarray(centroids).shape[0]), backend=backend)
        self.kmeans.centroids = torch.as_tensor(np.asarray(centroids)).float()
        k = self.kmeans.n_clusters
        self.agglom = np.arange(k) if agglom is None else np.asarray(agglom, dtype=np.int64).reshape(-1)
        if len(self.agglom) != k:
            raise ValueError(f"agglom has {len(self.agglom)} entries for {k} centroids")
        self.seg = seg or SegmentConfig()
        if delta is None:
            preset = rate_preset(rate or "6.25hz")
            delta = preset["delta"]
            quantile = preset["quantile"] if quantile is None else quantile
        self.delta = check_delta(delta)
        self.quantile = check_quantile(self.seg.quantile if quantile is None else quantile)
        self.backend = backend

    @property
    def vocab_size(self) -> int:
        return int(self.agglom.max()) + 1

    def features(self, wav) -> torch.Tensor:
        with torch.no_grad():
            f = self.encoder(check_waveform(wav).float())
        if f.ndim == 3:
            f = f[0]
        return f.float()

    def segment(self, feats: torch.Tensor) -> torch.Tensor:
        return sylboost_segment(
            feats,
            delta=self.delta,
            quantile=self.quantile,
            max_len=self.seg.max_len,
            min_len=self.seg.min_len,
            max_rate_hz=self.seg.max_rate_hz,
            backend=self.backend,
        )

    def encode(self, wav, dedup: bool = True) -> Units:
        feats = self.features(wav)
        if feats.shape[0] == 0:
            return Units(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        borders = self.segment(feats)
        ids = self.agglom[self.kmeans.predict(pool_segments(feats, borders)).numpy()]
        starts, ends = borders[:-1].numpy(), borders[1:].numpy()
        return deduplicate(ids, starts, ends) if dedup else Units(ids, starts, ends)

    def encode_batch(self, wavs, dedup: bool = True) -> list[Units]:
        """``encode`` for a list of waveforms: features one by one (the encoder takes one utterance), then one padded
        segmentation DP for the batch and one k-means assignment for all segments. Equals ``[encode(w) for w in
        wavs]``."""
        if isinstance(wavs, (torch.Tensor, np.ndarray)) and np.ndim(wavs) != 2:
            raise ValueError(f"wavs must be a list of 1-D waveforms or a [B, S] array, got shape {np.shape(wavs)}")
        feats = [self.features(w) for w in wavs]
        if not feats:
            return []
        empty = Units(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        live = [i for i, f in enumerate(feats) if f.shape[0] > 0]
        out: list[Units] = [empty] * len(feats)
        if not live:
            return out
        lengths = [feats[i].shape[0] for i in live]
        padded = torch.zeros(len(live), max(lengths), feats[live[0]].shape[1])
        for row, i in enumerate(live):
            padded[row, : lengths[row]] = feats[i]
        borders = sylboost_segment(
            padded,
            delta=self.delta,
            quantile=self.quantile,
            max_len=self.seg.max_len,
            min_len=self.seg.min_len,
            max_rate_hz=self.seg.max_rate_hz,
            lengths=lengths,
            backend=self.backend,
        )
        pooled = [pool_segments(feats[i], b) for i, b in zip(live, borders)]
        ids = self.agglom[self.kmeans.predict(torch.cat(pooled)).numpy()]
        start = 0
        for i, b, p in zip(live, borders, pooled):
            u = ids[start : start + len(p)]
            start += len(p)
            s, e = b[:-1].numpy(), b[1:].numpy()
            out[i] = deduplicate(u, s, e) if dedup else Units(u, s, e)
        return out

    @classmethod
    def fit(
        cls,
        encoder: Encoder,
        wavs,
        n_kmeans: int,
        n_units: int | None = None,
        target_hz: float = 6.25,
        seed: int = 0,
        seg: SegmentConfig | None = None,
        backend: str = "auto",
    ) -> SylBoostTokenizer:
        """Calibrate delta to ``target_hz`` on ``wavs``, segment, then fit k-means and the Ward merge."""
        seg = seg or SegmentConfig()
        tok = cls(encoder, np.zeros((1, 1)), delta=1.0, seg=seg, backend=backend)
        feats = [tok.features(w) for w in wavs]
        delta = calibrate_delta(feats, target_hz, quantile=seg.quantile, max_len=seg.max_len, min_len=seg.min_len)
        tok.delta = delta
        pooled = torch.cat([pool_segments(f, tok.segment(f)) for f in feats])
        km = KMeans(n_kmeans, seed=seed, backend=backend).fit(pooled)
        agglom = ward_merge(km.centroids, n_units) if n_units else None
        return cls(encoder, km.centroids.numpy(), agglom, delta=delta, quantile=seg.quantile, seg=seg, backend=backend)

    def save(self, path: str | Path) -> None:
        """Write centroids, agglom table and rate parameters to one ``.npz``."""
        with atomic_write(path, "wb") as f:
            np.savez(
                f,
                centroids=self.kmeans.centroids.numpy(),
                agglom=self.agglom,
                delta=np.float64(self.delta),
                quantile=np.float64(self.quantile),
            )

    @classmethod
    def load(cls, path: str | Path, encoder: Encoder, backend: str = "auto") -> SylBoostTokenizer:
        with np.load(path) as z:
            missing = {"centroids", "agglom", "delta", "quantile"} - set(z.files)
            if missing:
                raise ValueError(f"{path} is not a tokenizer file (missing {sorted(missing)})")
            return cls(
                encoder,
                z["centroids"],
                z["agglom"],
                delta=float(z["delta"]),
                quantile=float(z["quantile"]),
                backend=backend,
            )

    @classmethod
    def from_official(
        cls, sylboost_pth, kmeans_npy, agglom_npy, rate: str = "6.25hz", config=None, backend: str = "auto"
    ) -> SylBoostTokenizer:
        """The released tokenizer: SylBoost data2vec2 checkpoint + k-means centroids + agglomerative table."""
        from .data2vec2 import load_sylboost_checkpoint

        encoder = load_sylboost_checkpoint(sylboost_pth, config)

        def encode(wav: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return encoder(torch.as_tensor(wav).float())[0]

        tok = load_official_units(encode, kmeans_npy, agglom_npy, rate=rate)
        tok.backend = backend
        tok.kmeans.backend = backend
        return tok

    def seconds(self, units: Units) -> list[tuple[int, float, float]]:
        return units.seconds(FRAME_RATE)


def load_official_units(
    encoder: Encoder, kmeans_npy: str | Path, agglom_npy: str | Path, rate: str = "6.25hz"
) -> SylBoostTokenizer:
    """Tokenizer from the released k-means centroids and agglomerative table (``np.load``; checked for shape)."""
    centroids = np.load(kmeans_npy)
    agglom = np.load(agglom_npy).reshape(-1)
    if centroids.ndim != 2:
        raise ValueError(f"{kmeans_npy}: centroids must be [K, D], got shape {centroids.shape}")
    if agglom.shape[0] != centroids.shape[0]:
        raise ValueError(f"{agglom_npy}: {agglom.shape[0]} entries for {centroids.shape[0]} centroids")
    if not np.issubdtype(agglom.dtype, np.integer) or agglom.min() < 0:
        raise ValueError(f"{agglom_npy}: expected non-negative integer unit ids")
    return SylBoostTokenizer(encoder, centroids.astype(np.float32), agglom, rate=rate)
