"""Optimiser helpers shared by the trainers: per-attribute Adam groups whose tensors grow and shrink under
densification (3DGS ``cat_tensors_to_optimizer`` / ``_prune_optimizer`` semantics), and the exponential schedules."""

from __future__ import annotations

import math

import torch
from torch import nn


def expon_lr(step: int, lr_init: float, lr_final: float, max_steps: int, delay_steps: int = 0, delay_mult: float = 1.0):
    """3DGS ``get_expon_lr_func``: log-linear from lr_init to lr_final over max_steps, optionally scaled by
    delay_mult + (1 - delay_mult) sin(pi/2 min(step / delay_steps, 1))."""
    if step < 0 or (lr_init == 0.0 and lr_final == 0.0):
        return 0.0
    if delay_steps > 0:
        delay = delay_mult + (1 - delay_mult) * math.sin(0.5 * math.pi * min(max(step / delay_steps, 0.0), 1.0))
    else:
        delay = 1.0
    t = min(max(step / max_steps, 0.0), 1.0)
    return delay * math.exp(math.log(lr_init) * (1 - t) + math.log(lr_final) * t)


class ParamStore:
    """Named per-Gaussian parameters [N, ...] with one Adam optimizer (one group per name)."""

    def __init__(self, tensors: dict[str, torch.Tensor], lrs: dict[str, float], eps: float = 1e-15):
        self.params = {k: nn.Parameter(v.detach().clone().contiguous()) for k, v in tensors.items()}
        self.opt = torch.optim.Adam([{"params": [p], "lr": lrs[k], "name": k} for k, p in self.params.items()],
                                    lr=0.0, eps=eps)  # fmt: skip

    def __getitem__(self, k) -> nn.Parameter:
        return self.params[k]

    def __len__(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def set_lr(self, name: str, lr: float) -> None:
        for g in self.opt.param_groups:
            if g["name"] == name:
                g["lr"] = lr

    def _swap(self, name: str, new: torch.Tensor, fn_state) -> None:
        old = self.params[name]
        st = self.opt.state.pop(old, None)
        p = nn.Parameter(new.contiguous())
        if st is not None:
            st = {k: (fn_state(v) if k in ("exp_avg", "exp_avg_sq") else v) for k, v in st.items()}
            self.opt.state[p] = st
        for g in self.opt.param_groups:
            if g["name"] == name:
                g["params"] = [p]
        self.params[name] = p

    def append(self, new: dict[str, torch.Tensor]) -> None:
        for k, v in new.items():
            n_new = v.shape[0]
            self._swap(k, torch.cat([self.params[k].detach(), v.detach()]),
                       lambda s, n=n_new: torch.cat([s, s.new_zeros((n, *s.shape[1:]))]))  # fmt: skip

    def keep(self, mask: torch.Tensor) -> None:
        for k in list(self.params):
            self._swap(k, self.params[k].detach()[mask], lambda s: s[mask])

    def replace(self, name: str, value: torch.Tensor) -> None:
        """New values for one attribute, with its Adam moments reset (3DGS ``replace_tensor_to_optimizer``)."""
        self._swap(name, value.detach(), torch.zeros_like)

    def state_dict(self) -> dict:
        return {"params": {k: v.detach() for k, v in self.params.items()}, "opt": self.opt.state_dict()}

    def load_state_dict(self, sd: dict, lrs: dict[str, float], eps: float = 1e-15) -> None:
        self.__init__(sd["params"], lrs, eps)
        self.opt.load_state_dict(sd["opt"])


class DensifyStats:
    """Running view-space positional gradient norms and max 2D radii (3DGS ``add_densification_stats``)."""

    def __init__(self, n: int, device):
        self.reset(n, device)

    def reset(self, n: int, device) -> None:
        self.grad_accum = torch.zeros(n, device=device)
        self.denom = torch.zeros(n, device=device)
        self.max_radii = torch.zeros(n, device=device)

    def add(self, means2d_grad: torch.Tensor, radii: torch.Tensor, width: int, height: int) -> None:
        vis = radii > 0
        # gradients w.r.t. NDC coordinates, as the 3DGS CUDA rasterizer reports them: d/d ndc = d/d px * size / 2
        g = means2d_grad[vis] * torch.tensor([width / 2.0, height / 2.0], device=means2d_grad.device)
        self.grad_accum[vis] += g.norm(dim=-1)
        self.denom[vis] += 1
        self.max_radii[vis] = torch.maximum(self.max_radii[vis], radii[vis].float())

    def mean_grad(self) -> torch.Tensor:
        g = self.grad_accum / self.denom.clamp_min(1)
        return torch.where(self.denom > 0, g, torch.zeros_like(g))

    def keep(self, mask) -> None:
        self.grad_accum, self.denom, self.max_radii = self.grad_accum[mask], self.denom[mask], self.max_radii[mask]

    def extend(self, n: int) -> None:
        z = self.grad_accum.new_zeros(n)
        self.grad_accum, self.denom, self.max_radii = (torch.cat([t, z]) for t in (self.grad_accum, self.denom,
                                                                                  self.max_radii))  # fmt: skip
