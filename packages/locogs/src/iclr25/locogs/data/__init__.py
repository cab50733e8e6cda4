"""Data: the Scene container, synthetic scenes, COLMAP / Blender loaders, 3DGS PLY and point clouds."""

from .scene import Scene, llff_split, load_image, save_image

__all__ = ["Scene", "llff_split", "load_image", "save_image"]
