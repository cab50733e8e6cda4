"""The single driver for CI and for the README's two commands.

    nox -s demo                 # the main job: every method on its built-in data, paper-style tables
    nox -s lint repo readiness tests   # the test suite (what .ci/run runs)
    nox -t teal                 # everything tagged for one package
    nox -s "tests(teal)" -- -k gemv

Packages are discovered from packages/*/pyproject.toml (shared first). Installs use constraints/cpu.txt, so torch is
the CPU build (2.13.0+cpu); on this project's machines the wheel comes from pip's configured find-links, which is
handed to uv as UV_FIND_LINKS. Elsewhere, point UV_FIND_LINKS / UV_EXTRA_INDEX_URL at a source of CPU torch wheels.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nox
from nox.command import CommandFailed

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

nox.needs_version = ">=2026.8"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.download_python = "never"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "repo", "readiness", "tests"]

ROOT = Path(__file__).resolve().parent
CONSTRAINTS = ROOT / "constraints" / "cpu.txt"
PREFIX = "iclr25-"


def _load_packages() -> dict[str, dict]:
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text())
        name = pyproject.parent.name
        deps = data.get("project", {}).get("dependencies", [])
        siblings = sorted(
            {
                d.split(PREFIX, 1)[1].split(">")[0].split("<")[0].split("=")[0].split("[")[0].split(";")[0].strip()
                for d in deps
                if d.strip().startswith(PREFIX)
            }
        )
        found[name] = {
            "dist": data["project"]["name"],
            "siblings": [s for s in siblings if s != name],
            "no_deps": data.get("tool", {}).get("iclr25", {}).get("no-deps", []),
            "has_demo": (pyproject.parent / "src" / "iclr25" / name / "__main__.py").exists(),
            "benchmarks": sorted(
                str(p.relative_to(ROOT)) for p in (pyproject.parent / "benchmarks").glob("bench_*.py")
            ),
        }
    ordered = {"shared": found.pop("shared")} if "shared" in found else {}
    ordered.update(found)
    return ordered


PACKAGES = _load_packages()
METHODS = [p for p in PACKAGES if p != "shared"]


def _pip_find_links() -> str | None:
    """pip's configured find-links (where this machine keeps the CPU torch wheel), for uv."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    value = out.stdout.strip()
    return value or None


if "UV_FIND_LINKS" not in os.environ:
    _links = _pip_find_links()
    if _links:
        os.environ["UV_FIND_LINKS"] = _links


def _install_package(session: nox.Session, pkg: str, extras: str = "test") -> None:
    """One install call: shared + the package (+ siblings) as editables, with the CPU constraints."""
    info = PACKAGES[pkg]
    members = ["shared", *info["siblings"], pkg] if pkg != "shared" else ["shared"]
    args = ["-c", str(CONSTRAINTS)]
    for member in dict.fromkeys(members):
        spec = f"packages/{member}"
        if member == pkg and extras:
            spec += f"[{extras}]"
        args += ["-e", spec]
    session.install(*args)
    if info["no_deps"]:
        session.install("--no-deps", *info["no_deps"])


_GUARD = r"""
import json, sys
from importlib import metadata
from pathlib import Path
root = Path(sys.argv[1]).resolve()
bad = []
for dist in metadata.distributions():
    name = (dist.metadata["Name"] or "").lower()
    if not name.startswith("iclr25-"):
        continue
    raw = dist.read_text("direct_url.json")
    info = json.loads(raw) if raw else {}
    url = info.get("url", "")
    editable = info.get("dir_info", {}).get("editable", False)
    path = Path(url[len("file://"):]).resolve() if url.startswith("file://") else None
    if not editable or path is None or root not in (path, *path.parents):
        bad.append(f"{name} (url={url or 'index'}, editable={editable})")
    else:
        print(f"editable guard: {name} -> {path.relative_to(root)}")
if bad:
    sys.exit("these iclr25 distributions are not editable installs from this checkout: " + ", ".join(bad))
"""

_VERSIONS = (
    "import importlib.metadata as m\n"
    "for n in ('torch', 'triton', 'numpy'):\n"
    "    try: print(f'{n}=={m.version(n)}')\n"
    "    except m.PackageNotFoundError: print(f'{n}: not installed')\n"
)


def _pytest(session: nox.Session, pkg: str, marker: str, success_codes: tuple[int, ...] = (0,)) -> None:
    session.run(
        "python",
        "-m",
        "pytest",
        f"packages/{pkg}/tests",
        "-m",
        marker,
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"TRITON_INTERPRET": "1", "PYTHONHASHSEED": "0"},
        success_codes=list(success_codes),  # by default 5 (no tests collected) is a failure
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repo."""
    session.install("ruff==0.17.6")  # pinned: formatter output changes between releases
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def repo(session: nox.Session) -> None:
    """The repo contract tests (seconds, no torch)."""
    session.install("pytest>=8", "pyyaml>=6")
    session.run(
        "python", "-m", "pytest", "tests", "--ignore=tests/readiness", "-p", "no:cacheprovider", *session.posargs
    )


@nox.session
def readiness(session: nox.Session) -> None:
    """GPU-day readiness on CPU: every package installed together, then scripts/gpu_check.sh --dry-run with the
    modules the GPU image lacks blocked must import every package, its kernels and benchmarks and collect its
    gpu/triton tests (tests/readiness)."""
    args = ["-c", str(CONSTRAINTS)]
    for pkg in PACKAGES:
        args += ["-e", f"packages/{pkg}[test]" if pkg != "shared" else "packages/shared[test]"]
    session.install(*args)
    no_deps = sorted({d for p in PACKAGES for d in PACKAGES[p]["no_deps"]})
    if no_deps:
        session.install("--no-deps", *no_deps)
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/readiness",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"TRITON_INTERPRET": "1", "PYTHONHASHSEED": "0"},
    )


@nox.session
@nox.parametrize("package", [nox.param(p, id=p, tags=[p, "cpu"]) for p in PACKAGES])
def tests(session: nox.Session, package: str) -> None:
    """Install shared + the package [test] with the CPU constraints, check the editables, run the fast tests."""
    _install_package(session, package)
    session.run("python", "-c", _VERSIONS)
    session.run("python", "-c", _GUARD, str(ROOT))
    _pytest(session, package, "not gpu and not slow")


@nox.session(default=False)
@nox.parametrize("package", [nox.param(p, id=p, tags=[p]) for p in PACKAGES])
def slow(session: nox.Session, package: str) -> None:
    """The slow tests (small paper reproductions) of one package."""
    _install_package(session, package)
    _pytest(session, package, "slow and not gpu", success_codes=(0, 5))  # not every package has slow tests


@nox.session(default=False)
def demo(session: nox.Session) -> None:
    """The main job: every method's demo on its built-in data, each printing a paper-style table."""
    pkgs = [p for p in METHODS if PACKAGES[p]["has_demo"]]
    if not pkgs:
        session.error("no package has a demo yet")
    args = ["-c", str(CONSTRAINTS), "-e", "packages/shared"] + [a for p in pkgs for a in ("-e", f"packages/{p}")]
    session.install(*args)
    no_deps = sorted({d for p in pkgs for d in PACKAGES[p]["no_deps"]})
    if no_deps:
        session.install("--no-deps", *no_deps)
    only = session.posargs or pkgs
    unknown = [p for p in only if p not in pkgs]
    if unknown:
        session.error(f"unknown packages {unknown}; packages with a demo: {', '.join(pkgs)}")
    results = []  # every demo runs even when one fails; the session fails at the end if any did
    outputs = ROOT / "demo-output"  # what the demos write (PNGs, JSON), git-ignored
    outputs.mkdir(exist_ok=True)
    session.chdir(outputs)
    for pkg in only:
        session.log(f"===== {pkg} demo =====")
        t0 = time.perf_counter()
        try:
            session.run("python", "-m", f"iclr25.{pkg}", "demo")
            ok = True
        except CommandFailed:
            ok = False
        results.append((pkg, ok, time.perf_counter() - t0))
    lines = ["===== demo summary =====", f"{'package':<12} {'result':<8} {'wall time':>10}"]
    lines += [f"{pkg:<12} {'ok' if ok else 'FAILED':<8} {wall:>9.1f}s" for pkg, ok, wall in results]
    lines.append(
        f"{'total':<12} {sum(ok for _, ok, _ in results)}/{len(results)} ok {sum(w for *_, w in results):>7.1f}s"
    )
    lines.append(f"outputs (figures, JSON) in {outputs.relative_to(ROOT)}/")
    for line in lines:
        session.log(line)
    failed = [pkg for pkg, ok, _ in results if not ok]
    if failed:
        session.error(f"demos failed: {', '.join(failed)}")


@nox.session(default=False)
@nox.parametrize("package", [nox.param(p, id=p, tags=[p]) for p in METHODS])
def bench(session: nox.Session, package: str) -> None:
    """Run a package's benchmarks; each writes its JSON results (see the package README)."""
    scripts = PACKAGES[package]["benchmarks"]
    if not scripts:
        session.skip(f"{package} has no benchmarks/bench_*.py")
    _install_package(session, package)
    out = ROOT / "benchmarks" / "results" / "cpu"
    for script in scripts:
        # every benchmark script takes --out; extra arguments after -- go to each script
        session.run("python", script, "--out", str(out / f"{package}-{Path(script).stem}.json"), *session.posargs)


@nox.session(default=False)
@nox.parametrize("package", [nox.param(p, id=p, tags=[p]) for p in PACKAGES])
def wheel(session: nox.Session, package: str) -> None:
    """Build wheels with hatchling, install them (not editables) and run the package tests against the installed wheel."""
    info = PACKAGES[package]
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.install("build>=1.2", "hatchling>=1.24")
    for member in dict.fromkeys(["shared", *info["siblings"], package]):
        # hatchling (hatch's build backend) builds each wheel; no isolation, so nothing is fetched for the build
        session.run("python", "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), f"packages/{member}")
    session.chdir(ROOT)
    links = [str(dist), *filter(None, os.environ.get("UV_FIND_LINKS", "").split())]  # CLI links replace the env's
    session.install(
        "-c", str(CONSTRAINTS), *[a for link in links for a in ("--find-links", link)], f"{info['dist']}[test]"
    )
    if info["no_deps"]:
        session.install("--no-deps", *info["no_deps"])
    session.run(
        "python",
        "-c",
        "import sys, json, importlib.metadata as m\n"
        "for d in m.distributions():\n"
        "    n = (d.metadata['Name'] or '').lower()\n"
        "    if n.startswith('iclr25-'):\n"
        "        raw = d.read_text('direct_url.json')\n"
        "        if raw and json.loads(raw).get('dir_info', {}).get('editable'):\n"
        "            sys.exit(f'{n} is an editable install; the wheel session must test built wheels')\n"
        "        print('wheel install:', n, d.version)\n",
    )
    with tempfile.TemporaryDirectory() as tmp:
        tests_copy = Path(tmp) / f"{package}_tests"
        shutil.copytree(ROOT / "packages" / package / "tests", tests_copy)
        shutil.copy(ROOT / "packages" / package / "pyproject.toml", Path(tmp) / "pyproject.toml")
        session.chdir(tmp)
        session.run(
            "python",
            "-m",
            "pytest",
            str(tests_copy),
            "-m",
            "not gpu and not slow",
            "-p",
            "no:cacheprovider",
            *session.posargs,
            env={"TRITON_INTERPRET": "1"},
        )


@nox.session(venv_backend="none", default=False, tags=["gpu"])
@nox.parametrize("package", [nox.param(p, id=p) for p in PACKAGES])
def gpu(session: nox.Session, package: str) -> None:
    """GPU checks with no install step (the GPU machine has no package index): PYTHONPATH on packages/*/src."""
    probe = subprocess.run(
        [sys.executable, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        session.skip("no CUDA device (or no torch) on this machine")
    pythonpath = os.pathsep.join(str(p) for p in sorted(ROOT.glob("packages/*/src")))
    session.run(
        sys.executable,
        "-m",
        "pytest",
        f"packages/{package}/tests",
        "-m",
        "gpu or triton",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"PYTHONPATH": pythonpath, "TRITON_INTERPRET": "0"},
        success_codes=[0, 5],
    )


@nox.session(venv_backend="none", default=False)
def matrix(session: nox.Session) -> None:
    """Print the package matrix as JSON (for the GitHub workflow)."""
    print(json.dumps({"package": list(PACKAGES)}))
