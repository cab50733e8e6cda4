"""Repo hygiene: no paths of one machine, no import cycles inside a package, GPU-ready READMEs and kernels.

Each check is written as a function over files or a source tree, and each has a test that feeds it a planted defect
(a mutant) to show that it can fail.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest
from conftest import PACKAGE_DIRS, ROOT

# ---------------------------------------------------------------------------------------------------------------------
# Machine-specific absolute paths
# ---------------------------------------------------------------------------------------------------------------------

# Directories that only exist on one machine (home folders, scratch, the CI/dev work trees, vendored wheel folders).
# A path inside a URL (https://host/tmp/..., file:///opt/...) is preceded by a host character or a slash and is not
# matched; a default such as "{env:X:<slash>opt<slash>wheels}" in a config is.
MACHINE_PATH = re.compile(
    r"(?<![A-Za-z0-9_./~\-])/(?:work|tmp|root|opt|home|Users|mnt|scratch|srv|var/tmp)/[^\s'\"`)]*"
)
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".sh", ".json", ".rst", ""}


def machine_paths_in(text: str) -> list[str]:
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for name in out.decode().split("\0"):
        path = ROOT / name
        if name and path.is_file() and path.suffix in TEXT_SUFFIXES and path.stat().st_size < 2_000_000:
            files.append(path)
    return files


def _planted(top: str, rest: str) -> str:
    """A machine path built at run time, so that this file itself holds none."""
    return "/" + top + "/" + rest


def test_machine_path_pattern_catches_planted_paths():
    wheels = _planted("opt", "wheels")
    assert machine_paths_in('UV_FIND_LINKS = "{env:UV_FIND_LINKS:' + wheels + '}"') == [wheels + "}"]
    assert machine_paths_in("bash scripts/gpu_check.sh " + _planted("tmp", "gpu-results")) == [
        _planted("tmp", "gpu-results")
    ]
    assert machine_paths_in("see ``" + _planted("work", "shared/notes.md") + "``") == [
        _planted("work", "shared/notes.md")
    ]
    assert machine_paths_in("cd " + _planted("root", "project") + " && pytest")
    # not machine paths: URLs, relative paths, shebangs, device files
    assert machine_paths_in("https://example.org/tmp/x and file:///opt/x") == []
    assert machine_paths_in("#!/usr/bin/env bash; >/dev/null; packages/teal/tmp/x; ~/work/x") == []


def test_no_machine_specific_paths_in_tracked_files():
    if not (ROOT / ".git").exists():
        pytest.fail("the hygiene checks need a git checkout (git ls-files)")
    bad = []
    for path in tracked_text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for hit in machine_paths_in(line):
                bad.append(f"{path.relative_to(ROOT)}:{lineno}: {hit}")
    assert not bad, "paths of one machine in tracked files (a user's machine has none of them):\n" + "\n".join(bad)


# ---------------------------------------------------------------------------------------------------------------------
# Import cycles inside a package (module-level and lazy, function-level imports alike)
# ---------------------------------------------------------------------------------------------------------------------


def _module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph(src: Path) -> dict[str, set[str]]:
    """Edges module -> module for every import of a sibling module, wherever it stands (top level or in a function).

    `from . import x` counts as an import of the submodule x when x is a module, else of the package. Imports under
    `if TYPE_CHECKING:` never run and are left out.
    """
    modules = {_module_name(src, p): p for p in sorted(src.rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in modules}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for mod, path in modules.items():
        base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        visitor = _ImportVisitor(base, owner, modules)
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        graph[mod] = visitor.edges - {mod}
    return graph


class _ImportVisitor(ast.NodeVisitor):
    """Collects the sibling modules one module imports (`base` is its package, as a list of name parts)."""

    def __init__(self, base: list[str], owner, modules: dict) -> None:
        self.base, self.owner, self.modules, self.edges = base, owner, modules, set()

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            target = self.owner(alias.name)
            if target:
                self.edges.add(target)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parent = self.base[: len(self.base) - (node.level - 1)]
            target = ".".join(parent + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        for alias in node.names:
            full = f"{target}.{alias.name}"
            dest = full if full in self.modules else self.owner(target)
            if dest:
                self.edges.add(dest)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    cycles.append(sorted(comp))
    return cycles


def test_import_cycle_check_catches_planted_cycles(tmp_path):
    pkg = tmp_path / "src" / "iclr25" / "toy"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("from .b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from .a import f  # lazy, still a cycle\n    return f\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n")
    (pkg / "d.py").write_text("from iclr25.toy.c import TYPE_CHECKING\n")
    (pkg / "kernels" / "__init__.py").write_text("from . import ref\n")
    (pkg / "kernels" / "ref.py").write_text("from ..kernels import helper\n")
    (pkg / "kernels" / "helper.py").write_text("import numpy\n")
    cycles = import_cycles(import_graph(tmp_path / "src"))
    assert cycles == [["iclr25.toy.a", "iclr25.toy.b"]]
    # a relative import two levels up, and an absolute one, also make edges
    (pkg / "kernels" / "helper.py").write_text("from .. import c\nimport iclr25.toy.kernels.ref\n")
    assert sorted(import_cycles(import_graph(tmp_path / "src"))) == [
        ["iclr25.toy.a", "iclr25.toy.b"],
        ["iclr25.toy.kernels.helper", "iclr25.toy.kernels.ref"],
    ]


@pytest.mark.parametrize("src", [p / "src" for p in PACKAGE_DIRS], ids=[p.name for p in PACKAGE_DIRS])
def test_no_import_cycles_inside_a_package(src):
    cycles = import_cycles(import_graph(src))
    assert not cycles, "import cycles (break them by moving the shared piece into its own module): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


# ---------------------------------------------------------------------------------------------------------------------
# GPU readiness that can be read from the files
# ---------------------------------------------------------------------------------------------------------------------

# Triton APIs that triton 3.6 (the GPU machine's version) does not have, read off the two releases' sources:
# names in triton.language.__all__ of 3.9 (the CPU pin) absent from 3.6, methods of triton.language.tensor likewise,
# and triton.__all__ likewise.
METHOD_DIRS = [p for p in PACKAGE_DIRS if p.name != "shared"]
TL_NAMES_MISSING_IN_36 = frozenset(
    {"atomic_load", "atomic_poll", "atomic_store", "expect_zero", "squeeze", "to_tensor", "unsqueeze"}
)
TENSOR_METHODS_MISSING_IN_36 = frozenset(
    {"atomic_load", "atomic_poll", "atomic_store", "ceil", "erf", "exp2", "floor", "log2", "sqrt_rn"}
)
TRITON_NAMES_MISSING_IN_36 = frozenset({"aggregate"})


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute | ast.Name) and getattr(target, "attr", getattr(target, "id", "")) == "jit"


def triton_calls_missing_in_36(source: str) -> list[str]:
    """Uses of Triton APIs that 3.6 lacks: `tl.X` and `triton.X` anywhere, `x.method()` inside @triton.jit bodies."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "tl" and node.attr in TL_NAMES_MISSING_IN_36:
                found.append(f"line {node.lineno}: tl.{node.attr}")
            if node.value.id == "triton" and node.attr in TRITON_NAMES_MISSING_IN_36:
                found.append(f"line {node.lineno}: triton.{node.attr}")
        if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr in TENSOR_METHODS_MISSING_IN_36
                    and not (isinstance(inner.func.value, ast.Name) and inner.func.value.id in {"tl", "libdevice"})
                ):
                    found.append(f"line {inner.lineno}: tensor.{inner.func.attr}() in @jit {node.name}")
    return found


def test_triton_36_check_catches_planted_uses():
    src = (
        "import triton\nimport triton.language as tl\n"
        "@triton.jit\ndef k(x_ptr):\n    x = tl.load(x_ptr)\n    y = tl.exp2(x) + x.exp2()\n"
        "    z = tl.unsqueeze(y, 0)\n    tl.store(x_ptr, z)\n"
        "def host(t):\n    return t.floor()  # torch, not a kernel\n"
    )
    assert sorted(triton_calls_missing_in_36(src)) == ["line 6: tensor.exp2() in @jit k", "line 7: tl.unsqueeze"]


@pytest.mark.parametrize("method_dir", METHOD_DIRS, ids=lambda p: p.name)
def test_kernels_use_only_triton_36_apis(method_dir):
    bad = []
    for path in sorted((method_dir / "src").rglob("*.py")):
        for hit in triton_calls_missing_in_36(path.read_text()):
            bad.append(f"{path.relative_to(ROOT)}: {hit}")
    assert not bad, "Triton APIs that triton 3.6 lacks (the GPU machine runs 3.6):\n" + "\n".join(bad)


@pytest.mark.parametrize("method_dir", METHOD_DIRS, ids=lambda p: p.name)
def test_package_readme_has_a_gpu_section(method_dir):
    text = (method_dir / "README.md").read_text()
    assert re.search(r"^## GPU\s*$", text, re.M), f"{method_dir.name}/README.md needs a '## GPU' section"
    section = text.split("## GPU", 1)[1].split("\n## ", 1)[0]
    assert "gpu_check" in section, "the GPU section must name the command that fills it (scripts/gpu_check.sh)"


DESIGN_NOTES = "shared" + "/design"  # split so that this file does not match itself


def test_no_tracked_file_points_at_the_design_notes():
    bad = [
        str(p.relative_to(ROOT))
        for p in tracked_text_files()
        if p.suffix != ".json" and DESIGN_NOTES in p.read_text(errors="replace")
    ]
    assert not bad, f"code and docs must not point at the developers' design notes: {bad}"
