"""Every package under packages/ follows the repo's naming, metadata, layout and kernel conventions."""

from __future__ import annotations

import ast
import re

from conftest import ROOT, load_pyproject

SHARED_VERSION = re.search(
    r'^__version__ = "([^"]+)"', (ROOT / "packages/shared/src/iclr25/shared/__init__.py").read_text(), re.M
).group(1)


def _requirement_name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[@]", req.strip(), maxsplit=1)[0].lower()


def _version_tuple(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _admits(spec: str, version: str) -> bool:
    """A small evaluator for the comparison operators we use in ranges (>=, <, <=, >, ==, ~=)."""
    v = _version_tuple(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        op, ver = re.match(r"(~=|>=|<=|==|!=|>|<)\s*([\w.]+)", clause).groups()
        w = _version_tuple(ver)
        ok = {
            ">=": v >= w,
            "<=": v <= w,
            ">": v > w,
            "<": v < w,
            "==": v == w,
            "!=": v != w,
            "~=": v >= w and v[: len(w) - 1] == w[: len(w) - 1],
        }[op]
        if not ok:
            return False
    return True


def test_names_follow_the_scheme(package_dir):
    name = package_dir.name
    project = load_pyproject(package_dir / "pyproject.toml")["project"]
    assert project["name"] == f"iclr25-{name}"
    assert (package_dir / "src" / "iclr25" / name / "__init__.py").is_file()
    assert not (package_dir / "src" / "iclr25" / "__init__.py").exists(), "iclr25 is a PEP 420 namespace"


def test_metadata_present(package_dir):
    data = load_pyproject(package_dir / "pyproject.toml")
    project = data["project"]
    assert _version_tuple(project["requires-python"].lstrip(">=")) >= (3, 10)
    assert project.get("license"), "license missing"
    assert project.get("readme") == "README.md" and (package_dir / "README.md").is_file()
    assert "version" in project or "version" in project.get("dynamic", [])
    assert data["build-system"]["build-backend"] == "hatchling.build"
    assert data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/iclr25"]
    init = (package_dir / "src" / "iclr25" / package_dir.name / "__init__.py").read_text()
    assert re.search(r'^__version__ = "[^"]+"', init, re.M), "__version__ missing from __init__.py"


def test_no_direct_references_and_a_test_extra(package_dir):
    project = load_pyproject(package_dir / "pyproject.toml")["project"]
    reqs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    for req in reqs:
        assert "@" not in req and "file:" not in req, f"direct reference in {package_dir.name}: {req}"
    assert "test" in project.get("optional-dependencies", {}), "a [test] extra is required"


def test_shared_range_admits_the_in_repo_shared(package_dir):
    project = load_pyproject(package_dir / "pyproject.toml")["project"]
    for req in project.get("dependencies", []):
        if _requirement_name(req) == "iclr25-shared":
            spec = req.split(";")[0][len("iclr25-shared") :].strip()
            assert spec, "iclr25-shared needs a compatible range, not a bare name"
            assert _admits(spec, SHARED_VERSION), f"{req} does not admit the in-repo shared {SHARED_VERSION}"
            return
    assert package_dir.name == "shared", f"{package_dir.name} must depend on iclr25-shared"


def test_torch_is_never_pinned_to_a_cuda_build(package_dir):
    project = load_pyproject(package_dir / "pyproject.toml")["project"]
    for req in project.get("dependencies", []):
        if _requirement_name(req) == "torch":
            assert "+cu" not in req and "==" not in req, f"torch must be a range: {req}"


def test_readme_sections(package_dir):
    text = (package_dir / "README.md").read_text()
    for section in ("Install", "Quick start", "API", "Results"):
        assert re.search(rf"^#+\s*{section}\b", text, re.M | re.I), f"README of {package_dir.name} lacks '{section}'"


def test_tests_folder_has_tests(package_dir):
    files = list((package_dir / "tests").glob("test_*.py"))
    assert files, f"{package_dir.name}/tests holds no test_*.py"
    assert any("def test_" in f.read_text() for f in files)


def test_test_basenames_are_unique_across_packages():
    seen = {}
    for f in ROOT.glob("packages/*/tests/**/test_*.py"):
        assert f.name not in seen, f"{f} and {seen[f.name]} share a basename"
        seen[f.name] = f


def test_pytest_config_loads_the_shared_plugin(package_dir):
    opts = load_pyproject(package_dir / "pyproject.toml")["tool"]["pytest"]["ini_options"]["addopts"]
    assert "iclr25.shared.testing.plugin" in opts and "--import-mode=importlib" in opts


def _functions(path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_triton_module_has_a_reference(package_dir):
    kernels = package_dir / "src" / "iclr25" / package_dir.name / "kernels"
    if not kernels.is_dir():
        return
    triton_modules = [
        p
        for p in kernels.glob("*.py")
        if p.name not in {"__init__.py", "reference.py"} and "triton.jit" in p.read_text()
    ]
    if not triton_modules:
        return
    reference = kernels / "reference.py"
    assert reference.is_file(), f"{package_dir.name}: kernels/ has Triton modules but no reference.py"
    ref_text = reference.read_text()
    assert "import triton" not in ref_text, "kernels/reference.py must be pure torch"
    refs = _functions(reference)
    for module in triton_modules:
        stem = module.stem
        bases = [r[: -len("_reference")] for r in refs if r.endswith("_reference")]
        assert any(stem.startswith(b) or b.startswith(stem) for b in bases), (
            f"{package_dir.name}: kernels/{module.name} has no matching <name>_reference in kernels/reference.py "
            f"(the module's name must begin with the reference's name, or the other way round)"
        )
    assert (kernels / "__init__.py").is_file(), "kernels/__init__.py must hold the dispatchers"


def test_no_namespace_init_anywhere(root):
    assert not list(root.glob("packages/*/src/iclr25/__init__.py"))


def test_benchmarks_take_an_out_path(package_dir):
    """nox's bench session and scripts/gpu_check.sh pass --out FILE to every benchmark script."""
    for script in (package_dir / "benchmarks").glob("bench_*.py"):
        text = script.read_text()
        assert '"--out"' in text and "write_result" in text, f"{script} must take --out and write via write_result"


def test_no_kernel_module_shadows_its_dispatcher(package_dir):
    """Importing kernels/foo.py sets the attribute ``kernels.foo`` to the module, which would replace a dispatcher
    function ``foo`` defined in kernels/__init__.py after the first Triton call."""
    kernels = package_dir / "src" / "iclr25" / package_dir.name / "kernels"
    if not (kernels / "__init__.py").is_file():
        return
    dispatchers = _functions(kernels / "__init__.py")
    for module in kernels.glob("*.py"):
        assert module.stem not in dispatchers or module.stem in {"__init__", "reference"}, (
            f"{package_dir.name}: kernels/{module.name} has the same name as the dispatcher {module.stem}()"
        )
