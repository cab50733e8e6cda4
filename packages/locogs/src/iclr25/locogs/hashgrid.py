"""Multi-resolution hash encoding with tiny-cuda-nn-exact semantics (``encodings/grid.h``, HashGrid)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .kernels import hashgrid_encode


def _next_multiple(x: int, m: int) -> int:
    return -(-x // m) * m


@dataclass(frozen=True)
class GridLayout:
    """Per-level scales, resolutions, sizes (entries), offsets (entries) and dense flags, computed as tcnn does."""

    n_levels: int
    features_per_level: int
    log2_hashmap_size: int
    base_resolution: int
    per_level_scale: float

    def __post_init__(self):
        if self.n_levels < 1 or self.features_per_level < 1:
            raise ValueError("hash grid: n_levels and features_per_level must be >= 1")
        if not 1 <= self.log2_hashmap_size <= 30:
            raise ValueError(f"hash grid: log2_hashmap_size must be in 1..30, got {self.log2_hashmap_size}")
        if self.base_resolution < 1 or self.per_level_scale < 1.0:
            raise ValueError("hash grid: base_resolution must be >= 1 and per_level_scale >= 1")

    @property
    def scales(self) -> list[float]:
        # tcnn grid_scale: exp2f(level * log2(per_level_scale)) * base_resolution - 1, in float32
        lg = np.float32(math.log2(self.per_level_scale))
        return [
            float(np.float32(np.exp2(np.float32(lv) * lg)) * np.float32(self.base_resolution) - np.float32(1.0))
            for lv in range(self.n_levels)
        ]

    @property
    def resolutions(self) -> list[int]:
        return [int(math.ceil(s)) + 1 for s in self.scales]  # tcnn grid_resolution

    @property
    def sizes(self) -> list[int]:
        t = 1 << self.log2_hashmap_size
        return [min(_next_multiple(min(r**3, (1 << 32) // 2 - 1), 8), t) for r in self.resolutions]

    @property
    def offsets(self) -> list[int]:
        return [0, *np.cumsum(self.sizes).tolist()][:-1]

    @property
    def dense_levels(self) -> list[bool]:
        return [r**3 <= s for r, s in zip(self.resolutions, self.sizes)]

    @property
    def n_entries(self) -> int:
        return int(sum(self.sizes))

    @property
    def n_params(self) -> int:
        return self.n_entries * self.features_per_level

    @property
    def n_output_dims(self) -> int:
        return self.n_levels * self.features_per_level

    def level_tensors(self, device) -> dict:
        return {
            "scale": torch.tensor(self.scales, dtype=torch.float32, device=device),
            "resolution": torch.tensor(self.resolutions, dtype=torch.long, device=device),
            "size": torch.tensor(self.sizes, dtype=torch.long, device=device),
            "offset": torch.tensor(self.offsets, dtype=torch.long, device=device),
            "dense": torch.tensor(self.dense_levels, dtype=torch.bool, device=device),
        }


class HashGridEncoding(nn.Module):
    """``enc(points01)`` -> [N, n_levels * features_per_level]; parameters in ``enc.table`` [n_entries, F].

    Defaults are LocoGS's (16 levels, 2 features, 2^19 table, base 16, per-level scale 1.447 -> finest 4096);
    initial values U(-1e-4, 1e-4) as in tcnn."""

    def __init__(
        self,
        n_levels: int = 16,
        features_per_level: int = 2,
        log2_hashmap_size: int = 19,
        base_resolution: int = 16,
        per_level_scale: float = 1.447269237440378,
        backend: str = "auto",
    ):
        super().__init__()
        self.layout = GridLayout(n_levels, features_per_level, log2_hashmap_size, base_resolution, per_level_scale)
        self.backend = backend
        self.table = nn.Parameter(torch.empty(self.layout.n_entries, features_per_level).uniform_(-1e-4, 1e-4))

    @property
    def n_params(self) -> int:
        return self.layout.n_params

    @property
    def n_output_dims(self) -> int:
        return self.layout.n_output_dims

    def forward(self, points01: torch.Tensor) -> torch.Tensor:
        return hashgrid_encode(points01, self.table, self.layout, self.backend)

    def extra_repr(self) -> str:
        lay = self.layout
        return (
            f"levels={lay.n_levels}, F={lay.features_per_level}, log2T={lay.log2_hashmap_size}, params={lay.n_params}"
        )
