"""Shared fixtures for the repo contract tests (no torch needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = sorted(p.parent for p in ROOT.glob("packages/*/pyproject.toml"))


def load_pyproject(path: Path) -> dict:
    return tomllib.loads(path.read_text())


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def pytest_generate_tests(metafunc):
    if "package_dir" in metafunc.fixturenames:
        metafunc.parametrize("package_dir", PACKAGE_DIRS, ids=[p.name for p in PACKAGE_DIRS])
