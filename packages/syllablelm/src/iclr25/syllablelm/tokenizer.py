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

from .config import FRAME_RATE, SegmentConfig, rate_preset
from .segment import calibrate_delta, sylboost_segment
from .units import KMeans, Units, deduplicate, pool_segments, ward_merge

__all__ = ["SylBoostTokenizer"]

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
            delta, quantile = preset["delta"], quantile or preset["quantile"]
        self.delta = float(delta)
        self.quantile = float(quantile or self.seg.quantile)
        self.backend = backend

    @property
    def vocab_size(self) -> int:
        return int(self.agglom.max()) + 1

    def features(self, wav) -> torch.Tensor:
        with torch.no_grad():
            f = self.encoder(torch.as_tensor(wav).float())
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
        from .loaders import load_official_units

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
