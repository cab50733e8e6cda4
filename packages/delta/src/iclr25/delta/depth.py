"""Depth providers: ground truth, a ``transformers`` depth-estimation wrapper, and metric alignment."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn.functional as F

from .geometry import align_disparity_lstsq, disparity_to_depth


@runtime_checkable
class DepthProvider(Protocol):
    """Anything that maps a video [T, 3, H, W] (uint8 / 0..255) to metric depth [T, H, W] in metres."""

    def __call__(self, video) -> torch.Tensor: ...


class GroundTruthDepth:
    """Returns stored depth maps (e.g. a synthetic clip's or a dataset's) after checking the frame count."""

    def __init__(self, depth):
        self.depth = torch.as_tensor(np.asarray(depth), dtype=torch.float32)

    def __call__(self, video) -> torch.Tensor:
        if len(video) != self.depth.shape[0]:
            raise ValueError(f"video has {len(video)} frames, stored depth has {self.depth.shape[0]}")
        return self.depth


class TransformersDepth:
    """Wrap a ``transformers`` depth-estimation model (``AutoModelForDepthEstimation``) you have locally.

    ``output="depth"`` treats ``predicted_depth`` as metric depth (e.g. metric Depth-Anything checkpoints);
    ``output="disparity"`` treats it as relative disparity and aligns it by least squares to ``reference_depth``
    (metric depth of frame 0, as DELTA aligns DepthCrafter to UniDepth) or, without reference, returns 1/disparity
    normalised to median 1 (scale-free; DELTA's outputs are then defined up to that global scale, see the README).
    """

    def __init__(self, model, output: str = "disparity", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                 input_size: int | None = None):  # fmt: skip
        if output not in ("depth", "disparity"):
            raise ValueError(f"output must be 'depth' or 'disparity', got {output!r}")
        self.model = model.eval()
        self.output = output
        self.mean = torch.tensor(mean).view(1, 3, 1, 1)
        self.std = torch.tensor(std).view(1, 3, 1, 1)
        self.input_size = input_size

    @classmethod
    def from_pretrained(cls, path: str, **kwargs) -> TransformersDepth:
        from transformers import AutoModelForDepthEstimation

        return cls(AutoModelForDepthEstimation.from_pretrained(path), **kwargs)

    @torch.no_grad()
    def predict_raw(self, video) -> torch.Tensor:
        v = torch.as_tensor(np.asarray(video)).float() / 255.0
        t, _, h, w = v.shape
        x = (v - self.mean) / self.std
        if self.input_size is not None:
            x = F.interpolate(x, (self.input_size, self.input_size), mode="bilinear", align_corners=False)
        dev = next(self.model.parameters()).device
        pred = self.model(pixel_values=x.to(dev)).predicted_depth.float().cpu()  # T h' w'
        return F.interpolate(pred[:, None], (h, w), mode="bilinear", align_corners=False)[:, 0]

    def __call__(self, video, reference_depth=None) -> torch.Tensor:
        raw = self.predict_raw(video)
        if self.output == "depth":
            return raw.clamp(min=1e-3)
        disp = raw.numpy().astype(np.float64)
        if reference_depth is not None:
            s, t = align_disparity_lstsq(disp[0], np.asarray(reference_depth, np.float64))
            return torch.from_numpy(disparity_to_depth(disp, s, t)).float()
        disp = np.maximum(disp, 1e-6)
        depth = 1.0 / disp
        return torch.from_numpy(depth / np.median(depth)).float()
