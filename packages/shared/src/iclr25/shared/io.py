"""Atomic file writes: readers never see a half-written file, and a failed writer leaves the old file intact."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success fsync it and rename it over ``path``.

    If the body raises, the temporary file is removed and ``path`` keeps its previous content.
    ``mode`` must be a write mode ("w", "wb", "x", "xb"); "x" refuses to replace an existing file.
    """
    if mode not in {"w", "wb", "x", "xb"}:
        raise ValueError(f"atomic_write mode must be one of 'w', 'wb', 'x', 'xb', got {mode!r}")
    path = Path(path)
    if mode.startswith("x") and path.exists():
        raise FileExistsError(f"{path} exists and mode={mode!r} refuses to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    binary = "b" in mode
    try:
        # mkstemp creates the file 0600: give it the mode of the file it replaces, else what open() would give
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else (encoding or "utf-8")) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename durable where the platform allows it
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
