"""LocoGS's shared neural field: scene contraction, hash grid, and four bias-free MLP heads."""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import FieldConfig
from .hashgrid import HashGridEncoding


def contract_unisphere(x: torch.Tensor, aabb=(-1.0, 1.0)) -> torch.Tensor:
    """nerfacc unisphere contraction: map to [-1, 1] by the AABB, squash |x| > 1 to (2 - 1/|x|) x/|x|, then
    rescale to [0, 1]^3 (x / 4 + 1/2)."""
    lo, hi = aabb
    x = (x - lo) / (hi - lo) * 2 - 1
    n = x.norm(dim=-1, keepdim=True)
    safe = n.clamp_min(1e-12)
    x = torch.where(n > 1, (2 - 1 / safe) * x / safe, x)
    return x / 4 + 0.5


class BiasFreeMLP(nn.Sequential):
    """tiny-cuda-nn FullyFusedMLP semantics: no biases, ReLU hidden layers, no output activation."""

    def __init__(self, n_in: int, n_out: int, width: int = 64, hidden_layers: int = 2):
        layers, d = [], n_in
        for _ in range(hidden_layers):
            layers += [nn.Linear(d, width, bias=False), nn.ReLU()]
            d = width
        layers.append(nn.Linear(d, n_out, bias=False))
        super().__init__(*layers)


HEADS = ("opacity", "rotation", "scale", "sh")


class LocoGSField(nn.Module):
    """f = HashGrid(contract(mu)); opacity, rotation, scale ratios and SH-rest come from four MLP heads."""

    def __init__(self, cfg: FieldConfig = FieldConfig(), sh_degree: int = 3, backend: str = "auto"):  # noqa: B008
        super().__init__()
        self.cfg, self.sh_degree = cfg, sh_degree
        self.grid = HashGridEncoding(cfg.n_levels, cfg.features_per_level, cfg.log2_hashmap_size,
                                     cfg.base_resolution, cfg.per_level_scale, backend)  # fmt: skip
        d, w, h = self.grid.n_output_dims, cfg.mlp_width, cfg.mlp_hidden_layers
        n_rest = ((sh_degree + 1) ** 2 - 1) * 3
        self.heads = nn.ModuleDict({
            "opacity": BiasFreeMLP(d, 1, w, h), "rotation": BiasFreeMLP(d, 4, w, h),
            "scale": BiasFreeMLP(d, 3, w, h), "sh": BiasFreeMLP(d, max(n_rest, 1), w, h),
        })  # fmt: skip

    def forward(self, means: torch.Tensor, init_opacity: float = 0.1) -> dict[str, torch.Tensor]:
        f = self.grid(contract_unisphere(means.detach(), self.cfg.aabb))  # no gradient into positions
        n = means.shape[0]
        rot = self.heads["rotation"](f) + torch.tensor([1.0, 0.0, 0.0, 0.0], device=f.device)
        k = (self.sh_degree + 1) ** 2
        return {
            "opacity": torch.sigmoid(
                self.heads["opacity"](f).squeeze(-1) + math.log(init_opacity / (1 - init_opacity))
            ),
            "rotation": torch.nn.functional.normalize(rot, dim=-1),
            "scale_ratio": torch.sigmoid(self.heads["scale"](f)),
            "sh_rest": self.heads["sh"](f)[:, : (k - 1) * 3].reshape(n, k - 1, 3),
        }
