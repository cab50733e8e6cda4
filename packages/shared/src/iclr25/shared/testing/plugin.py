"""pytest plugin shared by every iclr25 package: ``addopts = ["-p", "iclr25.shared.testing.plugin"]``.

At import time (before any test module, hence before any kernel module is imported) it switches the Triton
interpreter on when no CUDA device is present, because ``@triton.jit`` reads ``TRITON_INTERPRET`` when a kernel is
defined. It registers the markers ``triton``, ``gpu``, ``slow`` and ``integration``, skips ``gpu`` tests without CUDA,
skips ``triton`` tests when triton cannot be imported, and seeds every test (autouse fixture ``_iclr25_seed``).
"""

from __future__ import annotations

import os

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


CUDA = _cuda_available()
if not CUDA and "TRITON_INTERPRET" not in os.environ:
    os.environ["TRITON_INTERPRET"] = "1"

MARKERS = {
    "triton": "launches a Triton kernel (interpreted on CPU, native on CUDA)",
    "gpu": "needs a CUDA device; skipped without one",
    "slow": "takes more than a few seconds on 2 cores; deselect with -m 'not slow'",
    "integration": "several components end to end",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def pytest_report_header(config: pytest.Config) -> str:
    return f"iclr25: cuda={CUDA} TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '')!r}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from iclr25.shared.backend import triton_available

    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    skip_triton = pytest.mark.skip(reason="triton is not importable (or ICLR25_DISABLE_TRITON is set)")
    has_triton = None
    for item in items:
        if "gpu" in item.keywords and not CUDA:
            item.add_marker(skip_gpu)
        if "triton" in item.keywords:
            if has_triton is None:
                has_triton = triton_available()
            if not has_triton:
                item.add_marker(skip_triton)


@pytest.fixture(autouse=True)
def _iclr25_seed():
    """Every test starts from the same seeds (python, numpy, torch)."""
    from iclr25.shared.seeding import seed_everything

    seed_everything(0)
    yield
