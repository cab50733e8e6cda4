"""iclr25.shared: thin utilities shared by the iclr25 method packages.

Only numpy is a hard dependency; torch, triton and tqdm are imported lazily, inside the functions that need them.
No paper logic lives here.
"""

from .backend import resolve_backend, triton_available, is_interpreting, BACKENDS
from .triton_utils import autotune_configs, next_power_of_2, ensure_contiguous
from .seeding import seed_everything, make_rng
from .bench import Timer, BenchStats, benchmark, write_result, environment_info
from .progress import progress
from .io import atomic_write

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
