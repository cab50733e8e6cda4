"""Test helpers for the iclr25 packages.

- ``plugin``: the pytest plugin every package loads (``-p iclr25.shared.testing.plugin``).
- ``assert_close_ratio``: relative-RMS comparison of a kernel's output against its reference (NaN is a failure).
- ``tolerance``: the repo's tolerance table by dtype and device.
- ``KernelConformance``: a base class giving forward / backward / odd-shape / non-contiguous / NaN-poison tests of a
  kernel against its reference.
- ``nan_poison``: a context manager that makes ``torch.empty``-family allocations start as NaN.

Everything imports torch lazily, so ``import iclr25.shared.testing`` works without torch.
"""

from .compare import TOLERANCES, assert_close_ratio, tolerance
from .conformance import KernelConformance, nan_poison

__all__ = ["KernelConformance", "TOLERANCES", "assert_close_ratio", "nan_poison", "tolerance"]
