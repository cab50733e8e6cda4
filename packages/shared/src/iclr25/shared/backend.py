"""Backend choice between a Triton kernel and its pure-torch reference.

Rule (the repo's kernel convention):
- ``backend="auto"``: ``"triton"`` for CUDA tensors when triton imports and ``ICLR25_DISABLE_TRITON`` is unset,
  otherwise ``"torch"``. On CPU "auto" always gives the torch reference, even under the Triton interpreter, because
  the interpreter is orders of magnitude slower than torch.
- ``backend="torch"``: always the reference.
- ``backend="triton"``: the kernel. On CPU tensors this is only possible under the Triton interpreter
  (``TRITON_INTERPRET=1`` set before the kernel module is imported); otherwise a clear ``RuntimeError``.
"""

from __future__ import annotations

import functools
import os
from typing import Any

BACKENDS = ("auto", "torch", "triton")
_DISABLE_ENV = "ICLR25_DISABLE_TRITON"


def is_interpreting() -> bool:
    """True when the Triton interpreter is switched on (``TRITON_INTERPRET`` set to a true value)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in {"1", "true", "yes", "on"}


@functools.lru_cache(maxsize=1)
def _triton_imports() -> bool:
    try:
        import triton
        import triton.language  # noqa: F401
    except Exception:  # triton missing, or broken on this platform
        return False
    return True


def triton_available() -> bool:
    """True when triton imports and ``ICLR25_DISABLE_TRITON`` is not set to a true value."""
    if os.environ.get(_DISABLE_ENV, "0").strip().lower() in {"1", "true", "yes", "on"}:
        return False
    return _triton_imports()


def _device_type(x: Any) -> str:
    if x is None:
        return "cpu"
    if isinstance(x, str):
        return x.split(":")[0]
    dev = getattr(x, "device", None)
    if dev is None:
        return "cpu"
    return getattr(dev, "type", str(dev).split(":")[0])


def resolve_backend(x: Any = None, backend: str = "auto") -> str:
    """Return ``"triton"`` or ``"torch"`` for inputs living where ``x`` lives.

    ``x`` may be a tensor (its ``.device`` is read), a device, a device string, or ``None`` (CPU).
    """
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: expected one of {', '.join(map(repr, BACKENDS))}")
    if backend == "torch":
        return "torch"
    device = _device_type(x)
    if backend == "auto":
        return "triton" if device == "cuda" and triton_available() else "torch"
    # explicit triton
    if not triton_available():
        raise RuntimeError(
            "backend='triton' was requested but triton is not importable "
            f"(or {_DISABLE_ENV} is set); use backend='torch' or 'auto'"
        )
    if device != "cuda" and not is_interpreting():
        raise RuntimeError(
            f"backend='triton' on a {device!r} tensor needs the Triton interpreter: set TRITON_INTERPRET=1 before "
            "importing the kernel module, or use backend='auto'/'torch'"
        )
    return "triton"
