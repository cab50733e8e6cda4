"""Root files: constraints, README commands, CI script, workflow."""

from __future__ import annotations

import re

import yaml
from conftest import ROOT, load_pyproject


def test_constraints_pin_cpu_torch_and_triton():
    lines = {ln.strip() for ln in (ROOT / "constraints/cpu.txt").read_text().splitlines() if ln and ln[0] != "#"}
    assert "torch==2.13.0+cpu" in lines
    assert any(ln.startswith("triton==") for ln in lines)


def test_root_pyproject_is_workspace_only():
    data = load_pyproject(ROOT / "pyproject.toml")
    assert "project" not in data
    members = data["tool"]["hatch"]["envs"]["pkg"]["workspace"]["members"]
    paths = [m["path"] if isinstance(m, dict) else m for m in members]
    assert "packages/shared" in paths and "packages/{matrix:pkg}" in paths
    matrix = data["tool"]["hatch"]["envs"]["pkg"]["matrix"][0]["pkg"]
    methods = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml") if p.parent.name != "shared")
    assert sorted(matrix) == methods, "the hatch matrix must list every method package"


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^\s*(python -m pip install .*nox.*)$", text, re.M)


def test_readme_has_the_two_commands_and_ci_runs_the_test_one():
    cmds = _readme_commands()
    assert len(cmds) == 2, f"README must hold exactly two set-up commands, found {cmds}"
    demo, test = cmds
    assert "nox -s demo" in demo and "nox -s lint repo readiness tests" in test
    ci = (ROOT / ".ci/run").read_text()
    assert test.strip() in ci, ".ci/run must run exactly the README's test command"


def test_ci_workflow_is_valid():
    wf = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    jobs = wf["jobs"]
    assert {"matrix", "lint", "tests", "gpu"} <= set(jobs)
    assert "matrix" in jobs["tests"]["needs"]
    assert "gpu" in jobs["gpu"]["runs-on"]
    for job in jobs.values():
        assert job.get("steps"), "every job needs steps"


def test_gpu_script_exists_and_uses_pythonpath():
    text = (ROOT / "scripts/gpu_check.sh").read_text() + (ROOT / "scripts/gpu_check.py").read_text()
    assert "PYTHONPATH" in text and "gpu or triton" in text
