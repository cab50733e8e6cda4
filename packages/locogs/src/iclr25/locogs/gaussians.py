"""A plain set of 3D Gaussians with activated attributes (what any 3DGS renderer consumes)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class GaussianSet:
    means: torch.Tensor  # [N, 3]
    quats: torch.Tensor  # [N, 4] (w, x, y, z), need not be normalised
    scales: torch.Tensor  # [N, 3] standard deviations (activated, not log)
    opacities: torch.Tensor  # [N] in (0, 1)
    sh: torch.Tensor  # [N, K, 3] SH coefficients, K in {1, 4, 9, 16}; sh[:, 0] is the DC term
    sh_degrees: torch.Tensor | None = None  # [N] int: per-Gaussian SH degree (LocoGS adaptive bandwidth)

    def __post_init__(self):
        n = self.means.shape[0]
        expect = {"means": (n, 3), "quats": (n, 4), "scales": (n, 3), "opacities": (n,)}
        for name, shape in expect.items():
            if tuple(getattr(self, name).shape) != shape:
                raise ValueError(f"GaussianSet.{name} must be {shape}, got {tuple(getattr(self, name).shape)}")
        if (
            self.sh.dim() != 3
            or self.sh.shape[0] != n
            or self.sh.shape[2] != 3
            or self.sh.shape[1] not in (1, 4, 9, 16)
        ):
            raise ValueError(f"GaussianSet.sh must be [N={n}, 1|4|9|16, 3], got {tuple(self.sh.shape)}")
        if self.sh_degrees is not None and tuple(self.sh_degrees.shape) != (n,):
            raise ValueError(f"GaussianSet.sh_degrees must be [N={n}], got {tuple(self.sh_degrees.shape)}")

    def __len__(self) -> int:
        return self.means.shape[0]

    @property
    def sh_degree(self) -> int:
        return int(round(self.sh.shape[1] ** 0.5)) - 1

    def to(self, device) -> GaussianSet:
        return GaussianSet(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name).to(device)
                              for f in fields(self)})  # fmt: skip

    def detach(self) -> GaussianSet:
        return GaussianSet(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name).detach()
                              for f in fields(self)})  # fmt: skip

    def subset(self, idx) -> GaussianSet:
        return GaussianSet(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name)[idx]
                              for f in fields(self)})  # fmt: skip
