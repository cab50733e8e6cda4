"""The demo command end to end on a tiny scene."""

from __future__ import annotations

import os

import pytest

from iclr25.locogs.cli import main


@pytest.mark.integration
def test_demo_prints_table_and_writes_files(tmp_path, capsys):
    args = ["demo", "--size", "12", "--views", "9", "--points", "60", "--iterations", "12", "--log2-hashmap", "8",
            "--out", str(tmp_path)]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| 3DGS |" in out and "| LocoGS |" in out
    size = os.path.getsize(tmp_path / "scene.locogs")
    assert f"= file size {size}" in out
    assert (tmp_path / "side_by_side_test0.png").exists() and (tmp_path / "decoded.ply").exists()


@pytest.mark.integration
def test_demo_baseline_only(tmp_path, capsys):
    assert main(["demo", "--baseline", "--size", "12", "--views", "9", "--points", "60", "--iterations", "8",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "| 3DGS |" in out and "LocoGS |" not in out
    assert (tmp_path / "baseline_test0.png").exists() and (tmp_path / "baseline.ply").exists()
