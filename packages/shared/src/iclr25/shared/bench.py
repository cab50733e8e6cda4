"""Timing and one JSON result schema for every benchmark in the repo.

A result file holds one record::

    {"schema": "iclr25.bench/1", "name": ..., "params": {...}, "figures": {...},
     "env": {"device": ..., "device_name": ..., "python": ..., "numpy": ..., "torch": ..., "triton": ...,
             "git_commit": ..., "platform": ..., "time_utc": ...}}
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from .io import atomic_write

SCHEMA = "iclr25.bench/1"


def _sync() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class Timer:
    """Context manager measuring wall time in seconds (CUDA is synchronised at both ends when in use).

    >>> with Timer() as t:
    ...     pass
    >>> t.elapsed >= 0
    True
    """

    def __init__(self) -> None:
        self.elapsed = float("nan")
        self._start = 0.0

    def __enter__(self) -> Timer:
        _sync()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        _sync()
        self.elapsed = time.perf_counter() - self._start


@dataclasses.dataclass(frozen=True)
class BenchStats:
    """Seconds per call over ``repeat`` timed calls."""

    min: float
    median: float
    max: float
    repeat: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def benchmark(fn: Callable[[], Any], *, warmup: int = 3, repeat: int = 10) -> BenchStats:
    """Call ``fn`` ``warmup`` times untimed, then ``repeat`` times timed; return min/median/max seconds."""
    if warmup < 0 or repeat < 1:
        raise ValueError(f"benchmark needs warmup >= 0 and repeat >= 1, got warmup={warmup}, repeat={repeat}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        with Timer() as t:
            fn()
        times.append(t.elapsed)
    return BenchStats(min=min(times), median=statistics.median(times), max=max(times), repeat=repeat)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=os.getcwd(), check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def environment_info() -> dict:
    """Device, library versions and git commit, as recorded in every benchmark result."""
    import numpy

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "torch": None,
        "triton": None,
        "device": "cpu",
        "device_name": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "git_commit": _git_commit(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["device"] = "cuda"
            info["device_name"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:
        pass
    return info


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return _jsonable(value.item())
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def write_result(path: str | os.PathLike, record: dict) -> dict:
    """Write one benchmark record as JSON (atomically) and return what was written.

    ``record`` must have ``name`` (str), ``params`` (dict) and ``figures`` (dict); ``env`` is added.
    """
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict, got {type(record).__name__}")
    missing = [k for k in ("name", "params", "figures") if k not in record]
    if missing:
        raise ValueError(f"benchmark record is missing {missing}; it needs 'name', 'params' and 'figures'")
    if not isinstance(record["params"], dict) or not isinstance(record["figures"], dict):
        raise ValueError("benchmark record 'params' and 'figures' must be dicts")
    out = {"schema": SCHEMA, **_jsonable(record), "env": environment_info()}
    text = json.dumps(out, indent=2, sort_keys=False) + "\n"
    with atomic_write(path, "w") as f:
        f.write(text)
    return out
