"""scripts/gpu_check.{sh,py} and scripts/gpu_wheels.*: the parts that need no torch (the repo session)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_dry_run_runs_anywhere_and_writes_the_summary(tmp_path):
    # this session has no torch: the dry run must still exit 0, print the plan and say what is missing
    proc = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--dry-run", "--only", "shared", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "== environment" in proc.stdout and "== plan" in proc.stdout
    assert "pytest packages/shared/tests -m 'gpu or triton'" in proc.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["schema"] == "iclr25.gpu_check/1" and summary["dry_run"] is True
    assert list(summary["packages"]) == ["shared"]
    check = summary["packages"]["shared"]["import_check"]
    if importlib.util.find_spec("torch") is None:
        assert "torch" in check["missing"] or "torch" in check["runtime_missing"]


@pytest.mark.parametrize("bad", [["--total-budget", "0"], ["--only", "nosuchpkg"]])
def test_bad_arguments_are_refused(tmp_path, bad):
    proc = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--dry-run", *bad, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and ("must be > 0" in proc.stderr or "unknown packages" in proc.stderr)


def test_benchmark_args_come_from_gpu_args_or_the_device_option(tmp_path):
    a = tmp_path / "bench_a.py"
    a.write_text('GPU_ARGS = ["--device", "cuda", "--quick"]\nimport argparse\n')
    b = tmp_path / "bench_b.py"
    b.write_text('p.add_argument("--device", default="cpu")\n')
    c = tmp_path / "bench_c.py"
    c.write_text('p.add_argument("--out")\n')
    d = tmp_path / "bench_d.py"
    d.write_text("GPU_ARGS = ['--n', 3]\n")
    assert gpu_check.benchmark_args(a) == ["--device", "cuda", "--quick"]
    assert gpu_check.benchmark_args(b) == ["--device", "cuda"]
    assert gpu_check.benchmark_args(c) == []
    with pytest.raises(ValueError, match="GPU_ARGS must be a list of strings"):
        gpu_check.benchmark_args(d)


def test_junit_counts(tmp_path):
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest" tests="7" failures="1" errors="1" skipped="2"></testsuite></testsuites>'
    )
    assert gpu_check.junit_counts(xml) == {"passed": 3, "failed": 1, "errors": 1, "skipped": 2}
    assert gpu_check.junit_counts(tmp_path / "absent.xml")["report"] == "missing"


def _wheel(path, files):
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)


def test_wheels_unpack_without_pip_and_are_checked(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels / "probe_mod-1.0-py3-none-any.whl", {"probe_mod/__init__.py": "VALUE = 42\n"})
    digest = hashlib.sha256((wheels / "probe_mod-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    (wheels / "SHA256SUMS").write_text(f"{digest}  ./probe_mod-1.0-py3-none-any.whl\n")
    site = tmp_path / "site"
    assert gpu_check.unpack_wheels(wheels, site) == ["probe_mod-1.0-py3-none-any.whl"]
    out = subprocess.run(
        [sys.executable, "-c", "import probe_mod; print(probe_mod.VALUE)"],
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "42"
    # a wheel that does not match its checksum, or that writes outside the target, is refused
    (wheels / "SHA256SUMS").write_text(f"{'0' * 64}  ./probe_mod-1.0-py3-none-any.whl\n")
    with pytest.raises(SystemExit, match="does not match"):
        gpu_check.unpack_wheels(wheels, tmp_path / "site2")
    (wheels / "SHA256SUMS").unlink()
    _wheel(wheels / "evil-1.0-py3-none-any.whl", {"../escape.py": "x = 1\n"})
    with pytest.raises(SystemExit, match="outside the target"):
        gpu_check.unpack_wheels(wheels, tmp_path / "site3")


def test_wheel_list_is_pinned_and_small_by_declaration():
    lines = [
        ln.split("#")[0].strip()
        for ln in (ROOT / "scripts" / "gpu_wheels.txt").read_text().splitlines()
        if ln.split("#")[0].strip()
    ]
    assert lines and all("==" in ln for ln in lines), "pin every wheel that travels to the GPU machine"
    assert not {ln.split("==")[0] for ln in lines} & {"xgboost", "torch", "triton"}, "too large to carry"
    assert "60 * 1024 * 1024" in (ROOT / "scripts" / "gpu_wheels.sh").read_text()
