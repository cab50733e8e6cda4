"""Small helpers for writing Triton kernels that also run under the CPU interpreter."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from .backend import is_interpreting


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    if n <= 1:
        return 1
    return 1 << (n - 1).bit_length()


def autotune_configs(configs: Sequence[Any]) -> list:
    """The configs to hand to ``triton.autotune``: all of them on a GPU, only the first under the interpreter.

    The interpreter crashes ("0 active drivers") when autotune has more than one config to benchmark.
    """
    configs = list(configs)
    if not configs:
        raise ValueError("autotune_configs needs at least one config")
    return configs[:1] if is_interpreting() else configs


def ensure_contiguous(fn: Callable) -> Callable:
    """Decorator: every torch tensor among the positional and keyword arguments is made contiguous."""

    def _fix(a):
        return a.contiguous() if hasattr(a, "is_contiguous") and callable(a.contiguous) else a

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = tuple(_fix(a) for a in args)
        kwargs = {k: _fix(v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)

    wrapper.__signature__ = inspect.signature(fn)
    return wrapper
