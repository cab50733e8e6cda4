"""DELTA: dense efficient long-range 3D tracking for any video (Ngo et al., ICLR 2025), clean-room implementation."""

from .config import DeltaConfig
from .data.synthetic import SyntheticClip, render_synthetic_clip
from .model import DeltaModel
from .tracker import DeltaTracker, DenseTracks, SparseTracks

__version__ = "0.1.0"

__all__ = [
    "DeltaConfig",
    "DeltaModel",
    "DeltaTracker",
    "DenseTracks",
    "SparseTracks",
    "SyntheticClip",
    "render_synthetic_clip",
    "__version__",
]
