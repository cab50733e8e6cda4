"""Seeding for reproducible runs."""

from __future__ import annotations

import os
import random
import sys

import numpy as np


def seed_everything(seed: int) -> int:
    """Seed python's ``random``, numpy's global RNG and torch (CPU and CUDA) when torch is imported or importable.

    Returns the seed. Torch is only imported if it is already loaded or installed; this function never installs it.
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % (2**32))
    os.environ["PYTHONHASHSEED"] = str(seed)
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None:
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    return seed


def make_rng(seed: int | np.random.Generator | None = None) -> np.random.Generator:
    """A numpy ``Generator``: passes one through, builds one from an int seed, or a fresh one from ``None``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0):
        raise ValueError(f"seed must be None, a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(seed)
