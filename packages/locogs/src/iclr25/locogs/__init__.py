"""LocoGS (Shin et al., ICLR 2025): locality-aware Gaussian compression, on a differentiable Gaussian-splatting core
that runs on CPU (pure torch) and on GPU (Triton)."""

from .camera import Camera, look_at, orbit_cameras
from .codec import SizeReport, compress, decompress
from .config import FieldConfig, LocoGSConfig, RasterConfig, Train3DGSConfig
from .gaussians import GaussianSet
from .hashgrid import HashGridEncoding
from .metrics import LPIPS, lpips, psnr, ssim
from .model import LocoGS
from .renderer import RenderOutput, rasterize, render
from .train3dgs import TrainResult, train_3dgs
from .train_locogs import LocoGSResult, train_locogs

__version__ = "0.1.0"

__all__ = [
    "LPIPS",
    "Camera",
    "FieldConfig",
    "GaussianSet",
    "HashGridEncoding",
    "LocoGS",
    "LocoGSConfig",
    "LocoGSResult",
    "RasterConfig",
    "RenderOutput",
    "SizeReport",
    "Train3DGSConfig",
    "TrainResult",
    "compress",
    "decompress",
    "look_at",
    "lpips",
    "orbit_cameras",
    "psnr",
    "rasterize",
    "render",
    "ssim",
    "train_3dgs",
    "train_locogs",
]
