#!/usr/bin/env python3
"""The one prepared GPU check: every package's `gpu`/`triton` tests and every benchmark, with one JSON summary.

Written for the lent GPU machine as it is (Python 3.12, torch 2.11, triton 3.6; no package index, no nox): standard
library only, nothing installed, PYTHONPATH on packages/*/src. Usage (through scripts/gpu_check.sh):

    bash scripts/gpu_check.sh OUT                          # the real run, on a CUDA machine
    bash scripts/gpu_check.sh --dry-run OUT                # anywhere: environment, the plan with its budgets, and
                                                           # what each package misses to import, collect and run
    bash scripts/gpu_check.sh --dry-run --emulate-gpu-image OUT   # the same, as if the modules the GPU image lacks
                                                                  # were absent here too (GPU_IMAGE_MISSING)

The dry run (and a real run with --import-check) checks each package in a fresh interpreter: the package, every
module under its `kernels`, each benchmark file as a module, and `pytest --collect-only -m "gpu or triton"` of its
tests. The real run then runs every package's tests under a time budget with a JUnit report, and only after all of
them the benchmarks, each under its own budget, writing JSON (a budget overrun costs figures, not correctness checks).
A benchmark script gets the arguments in its module-level `GPU_ARGS` list if it has one (read without importing it),
else `--device cuda` when it takes a `--device` option, and always `--out`. Wheels of small modules the GPU image
lacks can ride along in `.gpu-wheels/` (see scripts/gpu_wheels.sh); they are unpacked into OUT/site.

OUT/summary.json (schema iclr25.gpu_check/1) holds the environment, the plan, and per package the import check, the
test counts (passed/failed/errors/skipped) and each benchmark's rc, wall time and JSON result. Exit status: 0 when
every import check passed and (in a real run) no test failed; a dry run always exits 0 unless it cannot write OUT.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "iclr25.gpu_check/1"
# Modules the lent GPU machine's image does not have (it has torch, triton, transformers, numpy, scipy, scikit-learn,
# networkx, opencv, matplotlib, tqdm, pytest, safetensors; no package index).
GPU_IMAGE_MISSING = ("xgboost", "cvxpy", "highspy", "constriction", "trl", "espeakng_loader")
TEST_SELECTION = "gpu or triton"
DEFAULTS = {"total_budget": 420.0, "test_budget": 45.0, "bench_budget": 25.0, "import_budget": 60.0}

# Runs in a fresh interpreter: block modules, then import the package, its kernels and benchmarks, collect the tests.
_IMPORT_CHECK = r"""
import importlib, importlib.util, json, pkgutil, sys, traceback
pkg, blocked, benches, tests_dir, selection = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
for name in filter(None, blocked.split(",")):
    sys.modules[name] = None  # `import name` now raises ImportError, as on a machine without it
report = {"errors": [], "missing": [], "collected": None}

def fail(what, exc):
    missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if missing:
        report["missing"].append(missing.split(".")[0])
    report["errors"].append(f"{what}: {type(exc).__name__}: {exc}")

try:
    mod = importlib.import_module(f"iclr25.{pkg}")
    kernels = importlib.util.find_spec(f"iclr25.{pkg}.kernels")
    if kernels is not None:
        kmod = importlib.import_module(f"iclr25.{pkg}.kernels")
        for info in pkgutil.walk_packages(kmod.__path__, prefix=f"iclr25.{pkg}.kernels."):
            try:
                importlib.import_module(info.name)
            except BaseException as exc:
                fail(info.name, exc)
except BaseException as exc:
    fail(f"iclr25.{pkg}", exc)
for path in filter(None, benches.split(",")):
    try:
        spec = importlib.util.spec_from_file_location("_gpu_check_bench", path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except BaseException as exc:
        fail(path, exc)
if tests_dir:
    import contextlib, io, pytest
    class Count:
        def __init__(self):
            self.n, self.errors = 0, []
        def pytest_collection_finish(self, session):
            self.n = len(session.items)  # after -m deselection
        def pytest_collectreport(self, report):
            if report.failed:
                lines = [ln for ln in str(report.longrepr).splitlines() if ln.strip()]
                self.errors.append(f"collecting {report.nodeid}: {lines[-1] if lines else 'failed'}")
    count = Count()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = pytest.main([tests_dir, "--collect-only", "-q", "-m", selection, "-p", "no:cacheprovider"], plugins=[count])
    report["collected"] = count.n
    for err in count.errors:
        report["errors"].append(err)
        for token in ("No module named '", "import of "):
            if token in err:
                report["missing"].append(err.split(token, 1)[1].split("'")[0].split(" ")[0].split(".")[0])
    if rc not in (0, 5) and not count.errors and not report["errors"]:
        report["errors"].append(f"pytest --collect-only exited {int(rc)}")
report["missing"] = sorted(set(report["missing"]))
print("@@IMPORT_CHECK@@" + json.dumps(report))
"""

_ENV_PROBE = r"""
import json, platform, sys
env = {"python": platform.python_version(), "machine": platform.machine()}
for name in ("torch", "triton", "numpy", "transformers", "scipy", "sklearn"):
    try:
        module = __import__(name)
        env[name] = getattr(module, "__version__", "unknown")
    except Exception as exc:
        env[name] = f"missing ({type(exc).__name__})"
try:
    import torch
    env["cuda"] = bool(torch.cuda.is_available())
    if env["cuda"]:
        env["device"] = torch.cuda.get_device_name(0)
        env["capability"] = list(torch.cuda.get_device_capability(0))
        env["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
    env["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    env["threads"] = torch.get_num_threads()
except Exception:
    env["cuda"] = False
print("@@ENV@@" + json.dumps(env))
"""


def _tagged_json(text: str, tag: str) -> dict | None:
    for line in text.splitlines():
        if line.startswith(tag):
            return json.loads(line[len(tag) :])
    return None


def packages() -> list[str]:
    names = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml"))
    return (["shared"] if "shared" in names else []) + [n for n in names if n != "shared"]


def benchmark_args(script: Path) -> list[str]:
    """GPU_ARGS from the script's source (not imported), else `--device cuda` when it takes --device."""
    source = script.read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "GPU_ARGS" for t in node.targets):
            value = ast.literal_eval(node.value)
            if not (isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)):
                raise ValueError(f"{script}: GPU_ARGS must be a list of strings, got {value!r}")
            return list(value)
    return ["--device", "cuda"] if '"--device"' in source or "'--device'" in source else []


def imported_top_modules(path: Path) -> set[str]:
    """Every absolute import in a file, wherever it stands (functions included): what it may need at run time."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def runtime_missing(files: list[Path], blocked: tuple[str, ...]) -> list[str]:
    """Modules imported somewhere in these files that this interpreter cannot find (or that are blocked)."""
    missing = set()
    for path in files:
        for name in imported_top_modules(path):
            if name in ("iclr25", "__future__") or name in sys.stdlib_module_names:
                continue
            if name in blocked or importlib.util.find_spec(name) is None:
                missing.add(name)
    return sorted(missing)


def plan(args: argparse.Namespace) -> dict:
    out = {}
    for pkg in packages():
        if args.only and pkg not in args.only:
            continue
        pkgdir = ROOT / "packages" / pkg
        benches = sorted((pkgdir / "benchmarks").glob("bench_*.py"))
        out[pkg] = {
            "tests": {
                "command": ["python", "-m", "pytest", f"packages/{pkg}/tests", "-m", TEST_SELECTION],
                "budget_s": args.test_budget,
            }
            if (pkgdir / "tests").is_dir()
            else None,
            "benchmarks": [
                {
                    "script": str(b.relative_to(ROOT)),
                    "args": benchmark_args(b),
                    "budget_s": args.bench_budget,
                }
                for b in benches
            ],
        }
    return out


def run_import_check(
    pkg: str, tests_dir: Path | None, benches: list[Path], blocked: tuple[str, ...], env: dict, budget: float
) -> dict:
    """Import iclr25.<pkg>, its kernels and `benches`, and collect `tests_dir` -m TEST_SELECTION, in a fresh
    interpreter where the `blocked` modules cannot be imported."""
    cmd = [
        sys.executable,
        "-c",
        _IMPORT_CHECK,
        pkg,
        ",".join(blocked),
        ",".join(str(b) for b in benches),
        str(tests_dir) if tests_dir else "",
        TEST_SELECTION,
    ]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=budget, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "errors": [f"import check ran past {budget:.0f} s"], "missing": [], "collected": None}
    report = _tagged_json(proc.stdout, "@@IMPORT_CHECK@@")
    if report is None:
        report = {"errors": [f"import check crashed (rc={proc.returncode}): {proc.stderr[-800:]}"], "missing": []}
        report["collected"] = None
    report["ok"] = not report["errors"]
    report["wall_s"] = round(time.perf_counter() - t0, 2)
    files = list(benches) + (sorted(tests_dir.rglob("*.py")) if tests_dir else [])
    report["runtime_missing"] = runtime_missing(files, blocked)
    return report


def junit_counts(path: Path) -> dict:
    if not path.is_file():
        return {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "report": "missing"}
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) for s in suites)
    errors = sum(int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return {"passed": tests - failed - errors - skipped, "failed": failed, "errors": errors, "skipped": skipped}


def timed_run(cmd: list[str], log: Path, env: dict, budget: float) -> tuple[int, float]:
    t0 = time.perf_counter()
    with log.open("w") as fh:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=budget).returncode
        except subprocess.TimeoutExpired:
            rc = 124
            fh.write(f"\n!! ran past its budget of {budget:.0f} s\n")
    return rc, round(time.perf_counter() - t0, 2)


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    json.loads(path.read_text())  # read back


def unpack_wheels(wheels: Path, site: Path) -> list[str]:
    """Unpack every wheel in `wheels` into `site` (a wheel is a zip laid out for site-packages; no pip, no index).

    Checked against wheels/SHA256SUMS when that file is there (scripts/gpu_wheels.sh writes it)."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    sums = {}
    if (wheels / "SHA256SUMS").is_file():
        for line in (wheels / "SHA256SUMS").read_text().splitlines():
            digest, _, name = line.partition("  ")
            sums[Path(name).name] = digest
    for wheel in found:
        if sums:
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            if sums.get(wheel.name) != digest:
                raise SystemExit(f"{wheel}: sha256 {digest} does not match SHA256SUMS ({sums.get(wheel.name)})")
        with zipfile.ZipFile(wheel) as zf:
            bad = [n for n in zf.namelist() if n.startswith("/") or ".." in Path(n).parts]
            if bad:
                raise SystemExit(f"{wheel}: refusing entries outside the target: {bad[:3]}")
            zf.extractall(site)
    return [w.name for w in found]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path, help="folder for summary.json, logs/ and bench/")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the import checks; run nothing else")
    p.add_argument("--emulate-gpu-image", action="store_true", help=f"block {', '.join(GPU_IMAGE_MISSING)}")
    p.add_argument("--only", type=lambda v: [x for x in v.split(",") if x], default=None, help="e.g. teal,delta")
    p.add_argument("--total-budget", type=float, default=DEFAULTS["total_budget"], help="seconds for everything")
    p.add_argument("--test-budget", type=float, default=DEFAULTS["test_budget"], help="seconds per package's tests")
    p.add_argument("--bench-budget", type=float, default=DEFAULTS["bench_budget"], help="seconds per benchmark")
    p.add_argument(
        "--rehearse-on-cpu",
        action="store_true",
        help="a real run on a CPU machine (Triton interpreted, benchmarks without GPU_ARGS/--device cuda), "
        "to exercise this script end to end",
    )
    p.add_argument("--import-check", action="store_true", help="in a real run too (costs ~5 s per package)")
    p.add_argument("--wheels", type=Path, default=ROOT / ".gpu-wheels", help="extra wheels to unpack (no index)")
    args = p.parse_args(argv)
    for name in ("total_budget", "test_budget", "bench_budget"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0 seconds, got {getattr(args, name)}")
    unknown = sorted(set(args.only or ()) - set(packages()))
    if unknown:
        p.error(f"unknown packages {unknown}; known: {packages()}")

    start = time.perf_counter()
    out: Path = args.out
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "bench").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    srcs = [str(p) for p in sorted(ROOT.glob("packages/*/src"))]
    site = out / "site"
    wheels = [] if args.dry_run else unpack_wheels(args.wheels, site)
    paths = ([str(site)] if wheels else []) + srcs + [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x]
    env.update(PYTHONPATH=os.pathsep.join(paths), TRITON_INTERPRET="0", PYTHONDONTWRITEBYTECODE="1")
    if args.dry_run or args.rehearse_on_cpu:
        env["TRITON_INTERPRET"] = "1"  # collection / a rehearsal on a CPU machine
    blocked = GPU_IMAGE_MISSING if args.emulate_gpu_image else ()

    probe = subprocess.run([sys.executable, "-c", _ENV_PROBE], env=env, capture_output=True, text=True, check=False)
    environment = _tagged_json(probe.stdout, "@@ENV@@") or {"probe_error": probe.stderr[-500:]}
    environment["blocked_modules"] = list(blocked)
    environment["wheels_unpacked"] = wheels
    if args.dry_run:
        environment["wheels_available"] = (
            sorted(w.name for w in args.wheels.glob("*.whl")) if args.wheels.is_dir() else []
        )
    print("== environment")
    for key, value in environment.items():
        print(f"   {key}: {value}")

    the_plan = plan(args)
    worst = sum(
        (info["tests"]["budget_s"] if info["tests"] else 0) + sum(b["budget_s"] for b in info["benchmarks"])
        for info in the_plan.values()
    )
    print(f"== plan (budgets: total {args.total_budget:.0f} s; sum of per-step budgets {worst:.0f} s)")
    summary = {
        "schema": SCHEMA,
        "dry_run": args.dry_run,
        "rehearsal_on_cpu": args.rehearse_on_cpu,
        "environment": environment,
        "budget": {"total_s": args.total_budget, "sum_of_step_budgets_s": worst},
        "packages": {},
    }
    status = 0

    def left() -> float:
        return args.total_budget - (time.perf_counter() - start)

    # Phase 1, every package: the plan, the import check (dry run, or --import-check), the gpu/triton tests.
    for pkg, info in the_plan.items():
        entry = {"plan": info}
        summary["packages"][pkg] = entry
        print(f"-- {pkg}")
        if info["tests"]:
            print(
                f"   tests: pytest packages/{pkg}/tests -m '{TEST_SELECTION}'  (budget {info['tests']['budget_s']:.0f} s)"
            )
        for b in info["benchmarks"]:
            print(f"   bench: {b['script']} {' '.join(b['args'])} --out ...  (budget {b['budget_s']:.0f} s)")
        if left() <= 0:
            entry["skipped"] = "total budget spent"
            print("   !! skipped: total budget spent")
            status = 1
            continue
        if args.dry_run or args.import_check:
            tests_dir = ROOT / "packages" / pkg / "tests" if info["tests"] else None
            benches = [ROOT / b["script"] for b in info["benchmarks"]]
            check = run_import_check(pkg, tests_dir, benches, blocked, env, min(DEFAULTS["import_budget"], left()))
            entry["import_check"] = check
            collected = "-" if check.get("collected") is None else check["collected"]
            print(f"   import check: {'ok' if check['ok'] else 'FAILED'}; {collected} gpu/triton tests collected")
            for err in check["errors"]:
                print(f"   !! {err}")
            if check["missing"]:
                print(f"   !! modules missing to import/collect: {', '.join(check['missing'])}")
            if check["runtime_missing"]:
                needs = ", ".join(check["runtime_missing"])
                print(f"   modules its tests/benchmarks import somewhere and this machine lacks: {needs}")
            if not check["ok"]:
                status = 1
        if args.dry_run or not info["tests"]:
            continue
        budget = min(info["tests"]["budget_s"], left())
        junit = out / "logs" / f"{pkg}-junit.xml"
        cmd = [sys.executable, *info["tests"]["command"][1:], "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
        if budget <= 0:
            entry["tests"] = {"skipped": "total budget spent"}
            status = 1
            continue
        rc, wall = timed_run(cmd, out / "logs" / f"{pkg}-tests.log", env, budget)
        entry["tests"] = t = {"rc": rc, "wall_s": wall, **junit_counts(junit)}
        print(
            f"   tests rc={rc} passed={t['passed']} failed={t['failed']} errors={t['errors']} "
            f"skipped={t['skipped']} ({wall:.1f} s)"
        )
        if rc not in (0, 5):
            status = 1
        write_json(out / "summary.json", {**summary, "status": status, "partial": True})

    # Phase 2: the benchmarks, after every package's tests (a budget overrun costs figures, never a correctness check).
    for pkg, info in the_plan.items():
        if args.dry_run:
            break
        entry = summary["packages"][pkg]
        entry["benchmarks"] = []
        for b in info["benchmarks"]:
            name = Path(b["script"]).stem
            result_path = out / "bench" / f"{pkg}-{name}.json"
            record = {"script": b["script"], "args": b["args"]}
            entry["benchmarks"].append(record)
            if left() <= 0:
                record["skipped"] = "total budget spent"
                print(f"   !! bench {pkg}/{name} skipped: total budget spent")
                continue
            bench_args = [] if args.rehearse_on_cpu else b["args"]
            cmd = [sys.executable, b["script"], *bench_args, "--out", str(result_path)]
            rc, wall = timed_run(cmd, out / "logs" / f"{pkg}-{name}.log", env, min(b["budget_s"], left()))
            record.update(rc=rc, wall_s=wall)
            if result_path.is_file():
                try:
                    record["result"] = json.loads(result_path.read_text())
                except json.JSONDecodeError as exc:
                    record["result_error"] = str(exc)
            print(f"-- bench {pkg}/{name}: rc={rc} ({wall:.1f} s){'' if 'result' in record else ' no result JSON'}")
        write_json(out / "summary.json", {**summary, "status": status, "partial": True})

    summary["status"] = status
    summary["wall_s"] = round(time.perf_counter() - start, 2)
    write_json(out / "summary.json", summary)
    print(
        f"== gpu_check {'dry run ' if args.dry_run else ''}finished: status {status}, {summary['wall_s']:.0f} s; "
        f"summary in {out / 'summary.json'}"
    )
    return 0 if args.dry_run else status


if __name__ == "__main__":
    sys.exit(main())
