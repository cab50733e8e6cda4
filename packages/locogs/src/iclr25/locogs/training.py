"""Pieces shared by the 3DGS and LocoGS trainers: the photometric loss, camera sampling, checkpoints."""

from __future__ import annotations

from pathlib import Path

import torch

from iclr25.shared import atomic_write

from .metrics import ssim


def photometric_loss(image: torch.Tensor, gt: torch.Tensor, lambda_dssim: float = 0.2) -> torch.Tensor:
    """(1 - lambda) L1 + lambda (1 - SSIM) (3DGS train.py)."""
    l1 = (image - gt).abs().mean()
    return (1.0 - lambda_dssim) * l1 + lambda_dssim * (1.0 - ssim(image, gt))


class CameraSampler:
    """3DGS's random camera stack: a fresh random permutation of the training views whenever it empties."""

    def __init__(self, n: int, seed: int = 0):
        if n < 1:
            raise ValueError("no training views")
        self.n, self.gen, self.stack = n, torch.Generator().manual_seed(seed), []

    def next(self) -> int:
        if not self.stack:
            self.stack = torch.randperm(self.n, generator=self.gen).tolist()
        return self.stack.pop()

    def state_dict(self) -> dict:
        return {"gen": self.gen.get_state(), "stack": list(self.stack)}

    def load_state_dict(self, sd: dict) -> None:
        self.gen.set_state(sd["gen"])
        self.stack = list(sd["stack"])


def save_checkpoint(path, payload: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as f:
        torch.save(payload, f)


def load_checkpoint(path, kind: str) -> dict:
    ck = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(ck, dict) or ck.get("kind") != kind:
        raise ValueError(f"{path} is not a {kind} checkpoint")
    return ck
