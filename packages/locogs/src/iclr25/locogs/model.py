"""The LocoGS representation: few explicit per-Gaussian attributes plus a shared neural field.

Explicit: fp16 position (straight-through), DC colour, one log base scale, a mask logit, three SH-band mask logits.
From the field: opacity, rotation, anisotropic scale ratios in (0, 1) and the SH rest coefficients.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .config import LocoGSConfig
from .data.knn import mean_sq_dist_knn
from .field import LocoGSField
from .gaussians import GaussianSet
from .optim import ParamStore
from .sh import rgb_to_sh


def half_ste(x: torch.Tensor) -> torch.Tensor:
    """Round to fp16 in the forward pass, identity gradient (LocoGS quantization_utils.half_ste)."""
    return x + (x.half().float() - x).detach()


def hard_mask_ste(m: torch.Tensor, threshold: float) -> torch.Tensor:
    """1[m > threshold] forward, gradient of m backward (Compact-3DGS masking)."""
    return (m > threshold).float() + m - m.detach()


def nested_band_masks(hard: torch.Tensor, k: int) -> torch.Tensor:
    """Per-coefficient SH mask [N, k]: coefficient of band l is multiplied by H_1 ... H_l (nested bands)."""
    n = hard.shape[0]
    cols = [torch.ones(n, device=hard.device, dtype=hard.dtype)]
    run = torch.ones(n, device=hard.device, dtype=hard.dtype)
    for band in range(1, int(round(k**0.5))):
        run = run * hard[:, band - 1]
        cols += [run] * (2 * band + 1)
    return torch.stack(cols, dim=1)


EXPLICIT = ("means", "f_dc", "scale_base", "mask", "sh_mask")


class LocoGS(nn.Module):
    """``LocoGS.from_points(xyz, rgb, cfg)``; ``model.gaussians(active_degree)`` -> differentiable GaussianSet."""

    def __init__(self, explicit: dict[str, torch.Tensor], cfg: LocoGSConfig, extent: float = 1.0, backend="auto"):
        super().__init__()
        self.cfg, self.extent = cfg, float(extent)
        self.field = LocoGSField(cfg.field, cfg.sh_degree, backend)
        missing = [k for k in EXPLICIT if k not in explicit]
        if missing:
            raise ValueError(f"LocoGS: explicit attributes missing: {missing}")
        self.store = ParamStore(explicit, self._explicit_lrs(0), cfg.adam_eps)

    @classmethod
    def from_points(cls, xyz, rgb, cfg: LocoGSConfig | None = None, extent: float = 1.0, backend="auto") -> LocoGS:
        """Dense initialisation from a point cloud: DC from colours, base scale from 3-NN distance, masks on."""
        cfg = cfg or LocoGSConfig()
        xyz = torch.as_tensor(np.asarray(xyz), dtype=torch.float32)
        if xyz.dim() != 2 or xyz.shape[1] != 3 or len(xyz) == 0:
            raise ValueError(f"LocoGS.from_points: xyz must be a non-empty [M, 3] array, got {tuple(xyz.shape)}")
        n = len(xyz)
        dist2 = torch.as_tensor(mean_sq_dist_knn(xyz.numpy()), dtype=torch.float32)
        explicit = {
            "means": xyz,
            "f_dc": rgb_to_sh(torch.as_tensor(np.asarray(rgb), dtype=torch.float32).reshape(n, 3)),
            "scale_base": torch.log(torch.sqrt(dist2))[:, None],
            "mask": torch.full((n,), cfg.init_mask_logit),
            "sh_mask": torch.full((n, 3), cfg.init_mask_logit),
        }
        return cls(explicit, cfg, extent, backend)

    def _explicit_lrs(self, step: int) -> dict[str, float]:
        c = self.cfg
        return {"means": c.position_lr_init * self.extent, "f_dc": c.dc_lr, "scale_base": c.scale_base_lr,
                "mask": c.mask_lr, "sh_mask": c.sh_mask_lr}  # fmt: skip

    def __len__(self) -> int:
        return len(self.store)

    @property
    def device(self):
        return self.store["means"].device

    def means(self) -> torch.Tensor:
        return half_ste(self.store["means"])

    def gaussians(self, hard: bool = True) -> tuple[GaussianSet, dict]:
        """Rendering attributes (straight-through masks applied) and the soft masks for the loss."""
        c = self.cfg
        means = self.means()
        fld = self.field(means, c.init_opacity)
        m_soft = torch.sigmoid(self.store["mask"])
        h_soft = torch.sigmoid(self.store["sh_mask"])
        m = hard_mask_ste(m_soft, c.mask_threshold) if hard else m_soft
        h = hard_mask_ste(h_soft, c.mask_threshold) if hard else h_soft
        scales = torch.exp(self.store["scale_base"]) * fld["scale_ratio"]
        sh = torch.cat([self.store["f_dc"][:, None, :], fld["sh_rest"]], dim=1)
        sh = sh * nested_band_masks(h, sh.shape[1])[..., None]
        g = GaussianSet(means, fld["rotation"], scales * m[:, None], fld["opacity"] * m, sh)
        return g, {"mask": m_soft, "sh_mask": h_soft, "opacity": fld["opacity"], "scales": scales}

    @torch.no_grad()
    def sh_degrees(self) -> torch.Tensor:
        """Per-Gaussian SH degree: number of leading bands whose hard mask is on."""
        on = (torch.sigmoid(self.store["sh_mask"]) > self.cfg.mask_threshold).long()
        return torch.cumprod(on, dim=1).sum(dim=1)

    @torch.no_grad()
    def export_gaussians(self) -> GaussianSet:
        """Plain 3DGS set with per-Gaussian SH degrees, masked Gaussians removed (what the decoder produces)."""
        keep = torch.sigmoid(self.store["mask"]) > self.cfg.mask_threshold
        g, _ = self.gaussians(hard=True)
        g = GaussianSet(g.means, g.quats, g.scales, g.opacities, g.sh, self.sh_degrees())
        return g.subset(keep).detach()

    def field_param_groups(self) -> list[dict]:
        h = self.field.heads
        return [
            {"params": list(self.field.grid.parameters()), "name": "grid"},
            {"params": list(h["opacity"].parameters()), "name": "opacity"},
            {"params": list(h["sh"].parameters()), "name": "sh"},
            {"params": list(h["scale"].parameters()), "name": "scale"},
            {"params": list(h["rotation"].parameters()), "name": "rotation"},
        ]

    def state(self) -> dict:
        return {"explicit": self.store.state_dict(), "field": self.field.state_dict(), "extent": self.extent}

    @classmethod
    def from_state(cls, state: dict, cfg: LocoGSConfig, backend="auto") -> LocoGS:
        model = cls(state["explicit"]["params"], cfg, state["extent"], backend)
        model.store.opt.load_state_dict(state["explicit"]["opt"])
        model.field.load_state_dict(state["field"])
        return model
