"""Progress bars that stay silent in logs and CI."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def _want_bar(force: bool | None) -> bool:
    if force is not None:
        return force
    env = os.environ.get("ICLR25_PROGRESS")
    if env is not None:
        return env.strip().lower() in {"1", "true", "yes", "on"}
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def progress(iterable: Iterable[T], *, force: bool | None = None, **tqdm_kwargs) -> Iterable[T]:
    """Wrap ``iterable`` in a tqdm bar when tqdm is installed and stderr is a TTY (or ``force=True`` /
    ``ICLR25_PROGRESS=1``); otherwise return it unchanged."""
    if not _want_bar(force):
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, **tqdm_kwargs)
