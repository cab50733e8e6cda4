"""iclr25.shared: thin utilities shared by the iclr25 method packages.

Only numpy is a hard dependency; torch, triton and tqdm are imported lazily, inside the functions that need them.
No paper logic lives here.
"""

from .backend import BACKENDS, is_interpreting, resolve_backend, triton_available
from .bench import BenchStats, Timer, benchmark, environment_info, write_result
from .io import atomic_write
from .progress import progress
from .seeding import make_rng, seed_everything
from .triton_utils import autotune_configs, ensure_contiguous, next_power_of_2

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "BenchStats",
    "Timer",
    "atomic_write",
    "autotune_configs",
    "benchmark",
    "ensure_contiguous",
    "environment_info",
    "is_interpreting",
    "make_rng",
    "next_power_of_2",
    "progress",
    "resolve_backend",
    "seed_everything",
    "triton_available",
    "write_result",
]
