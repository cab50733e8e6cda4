"""GPU-day readiness, proven on CPU (the `readiness` nox session installs every package together first).

The lent GPU machine has torch, triton, transformers, numpy, scipy, scikit-learn, networkx, opencv, matplotlib, tqdm,
pytest and safetensors, and no package index. scripts/gpu_check.sh must find nothing missing there: with the modules
that image lacks blocked (`sys.modules[name] = None` in a fresh interpreter), every package, every module under its
kernels and every benchmark must import, and its gpu/triton tests must collect.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PACKAGE_DIRS, ROOT

spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)

EIGHT_MINUTES = 480.0


def test_torch_is_installed_here():
    # these checks are only meaningful where the packages really import; the readiness session installs them all
    assert importlib.util.find_spec("torch") is not None, "run these tests through `nox -s readiness`"


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-dry-run")
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--dry-run", "--emulate-gpu-image", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if not (out / "summary.json").is_file():
        pytest.fail(
            f"the dry run wrote no summary (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc, json.loads((out / "summary.json").read_text())


def test_dry_run_exits_zero_and_prints_the_plan(dry_run):
    proc, summary = dry_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert summary["schema"] == "iclr25.gpu_check/1" and summary["dry_run"] is True
    assert sorted(summary["environment"]["blocked_modules"]) == sorted(gpu_check.GPU_IMAGE_MISSING)
    assert "torch" in summary["environment"]
    for pkg_dir in PACKAGE_DIRS:
        assert f"-- {pkg_dir.name}\n" in proc.stdout
        entry = summary["packages"][pkg_dir.name]
        for bench in sorted((pkg_dir / "benchmarks").glob("bench_*.py")):
            rel = str(bench.relative_to(ROOT))
            assert rel in proc.stdout, f"the dry run must list {rel}"
            assert any(b["script"] == rel and b["budget_s"] > 0 for b in entry["plan"]["benchmarks"])


def test_the_whole_check_fits_in_eight_minutes(dry_run):
    _, summary = dry_run
    assert summary["budget"]["total_s"] <= EIGHT_MINUTES - 60, "leave a minute for start-up and the copy back"


@pytest.mark.parametrize("pkg_dir", PACKAGE_DIRS, ids=[p.name for p in PACKAGE_DIRS])
def test_package_imports_and_collects_without_the_modules_the_gpu_image_lacks(dry_run, pkg_dir):
    _, summary = dry_run
    check = summary["packages"][pkg_dir.name]["import_check"]
    assert check["ok"], f"{pkg_dir.name} cannot import/collect on the GPU image: {check['errors']}"
    assert check["missing"] == []
    has_kernels = any((pkg_dir / "src").rglob("kernels/*.py")) or pkg_dir.name == "shared"
    if has_kernels:
        assert check["collected"] > 0, f"{pkg_dir.name} has kernels but no gpu/triton test was collected"


def _planted_package(tmp_path: Path, init: str, bench: str, test: str) -> tuple[Path, Path, dict]:
    src = tmp_path / "src" / "iclr25" / "gpuprobe"
    (src / "kernels").mkdir(parents=True)
    (src / "__init__.py").write_text(init)
    (src / "kernels" / "__init__.py").write_text("")
    (src / "kernels" / "ref.py").write_text("import math\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_probe.py").write_text(test)
    bench_file = tmp_path / "bench_probe.py"
    bench_file.write_text(bench)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "src"), *sys.path])}
    return tests, bench_file, env


def test_import_check_catches_top_level_imports_of_missing_modules(tmp_path):
    # the mutant: a package, a benchmark and a gpu test that each import a module the GPU image lacks at top level
    tests, bench, env = _planted_package(
        tmp_path,
        init="import xgboost\n",
        bench="import trl\n",
        test="import pytest\nimport cvxpy\n\n@pytest.mark.gpu\ndef test_x():\n    pass\n",
    )
    check = gpu_check.run_import_check("gpuprobe", tests, [bench], gpu_check.GPU_IMAGE_MISSING, env, 120)
    assert not check["ok"]
    assert check["missing"] == ["cvxpy", "trl", "xgboost"], check


def test_import_check_passes_lazy_imports_and_reports_them_as_runtime_needs(tmp_path):
    tests, bench, env = _planted_package(
        tmp_path,
        init="def fit():\n    import xgboost\n    return xgboost\n",
        bench="def main():\n    import trl\n",
        test="import pytest\n\n@pytest.mark.gpu\ndef test_x():\n    cvxpy = pytest.importorskip('cvxpy')\n",
    )
    check = gpu_check.run_import_check("gpuprobe", tests, [bench], gpu_check.GPU_IMAGE_MISSING, env, 120)
    assert check["ok"], check["errors"]
    assert check["collected"] == 1
    assert {"trl"} <= set(check["runtime_missing"])


def test_a_real_run_rehearsed_on_cpu_writes_test_counts_and_benchmark_records(tmp_path):
    # the real (non-dry) path end to end: tests with a JUnit report, then benchmarks under a budget that cuts them
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "gpu_check.sh"),
            "--rehearse-on-cpu",
            "--only",
            "shared,qpcert",
            "--bench-budget",
            "3",
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    summary_path = tmp_path / "summary.json"
    assert summary_path.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["rehearsal_on_cpu"] is True and "partial" not in summary
    for pkg in ("shared", "qpcert"):
        tests = summary["packages"][pkg]["tests"]
        assert tests["rc"] == 0 and tests["passed"] > 0 and tests["failed"] == 0, (pkg, tests)
    records = summary["packages"]["qpcert"]["benchmarks"]
    assert [r["script"] for r in records] == [
        str(p.relative_to(ROOT)) for p in sorted((ROOT / "packages/qpcert/benchmarks").glob("bench_*.py"))
    ]
    assert all("rc" in r and r["wall_s"] <= 3 + 5 for r in records), records  # cut at its budget (rc 124) or done
    assert proc.returncode == summary["status"] == 0
