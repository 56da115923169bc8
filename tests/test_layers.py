"""The code's layering, as pyproject.toml's import-linter contracts state it, and no import cycle.

import-linter reads a package from its directory, and an editable install keeps rbl.clients (the
Python client service and the client protocol) outside rbl/: the tests assemble the package as a
wheel lays it out (rbl/ with clients/ and templates/ inside) and check that.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parent.parent
BACKEND_WORDS = re.compile(r"docker|kubernetes", re.IGNORECASE)


def assemble(root: Path, copy: bool = False) -> Path:
    """rbl as installed, under root: links to the checkout's files (or copies, to alter them)."""
    package = root / "rbl"
    package.mkdir(parents=True)
    entries = [(entry, entry.name) for entry in (REPO / "rbl").iterdir() if entry.name != "__pycache__"]
    entries += [(REPO / "clients", "clients"), (REPO / "templates", "templates")]
    for source, name in entries:
        if copy and source.is_dir():
            shutil.copytree(source, package / name, ignore=shutil.ignore_patterns("__pycache__", "node_modules",
                                                                                  "target"))
        elif copy:
            shutil.copy2(source, package / name)
        else:
            (package / name).symlink_to(source)
    return root


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert command, "import-linter is a test dependency (pip install -e '.[test]')"
    # cwd outside the checkout: the current directory would put the editable layout first on sys.path
    return subprocess.run([command, "--no-cache", str(REPO / "pyproject.toml")], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)


def test_the_import_contracts_hold(tmp_path):
    result = lint_imports(assemble(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"Contracts: [1-9]\d* kept, 0 broken", result.stdout), result.stdout


@pytest.mark.parametrize("module, imports", [
    ("store/_upward.py", "from ..runner import run"),                      # the store above the runner
    ("runner/_upward.py", "from ..backends.local import backend"),        # the runner picking a backend
    ("backends/docker/_sideways.py", "from ..local import backend"),      # one backend using another
    ("targets/_upward.py", "from ..backends import net"),                  # a compile target using a backend
    ("targets/compose/_sideways.py", "from .. import istio"),              # one compile target using another
    ("mesh/_upward.py", "from ..targets import envoy"),                    # the mesh above the compile targets
    ("mesh/_running.py", "from ..runner import liveness"),                 # the mesh importing the runner
    ("dataplane/_upward.py", "from ..runner import liveness"),            # the proxy importing the tool
    ("lang/_upward.py", "from ..libraries import catalogue"),              # the language above the catalogue
    ("libraries/_upward.py", "from ..compiler import space"),              # the catalogue above the compiler
])
def test_the_contracts_refuse_an_import_against_the_layering(tmp_path, module, imports):
    root = assemble(tmp_path, copy=True)
    (root / "rbl" / module).write_text(f'"""An import the layering forbids."""\n\n{imports}\n')
    result = lint_imports(root)
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout + result.stderr


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm over the module graph: the groups of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return groups


def test_no_modules_import_each_other(tmp_path, monkeypatch):
    root = assemble(tmp_path)
    monkeypatch.syspath_prepend(str(root))
    for name in [name for name in sys.modules if name == "rbl" or name.startswith("rbl.")]:
        monkeypatch.delitem(sys.modules, name)
    graph = grimp.build_graph("rbl")
    assert "rbl.clients.python.service" in graph.modules and "rbl.dataplane.fault_proxy" in graph.modules
    assert strongly_connected(graph) == []


def package_graph(graph: grimp.ImportGraph) -> grimp.ImportGraph:
    """The module graph squashed to rbl's packages (rbl.compiler, rbl.lang, ...; a top-level module
    such as rbl.cli stands for itself): an arrow where any module of one imports any of the other."""
    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    squashed = grimp.ImportGraph()
    for module in graph.modules:
        squashed.add_module(package(module))
        for imported in graph.find_modules_directly_imported_by(module):
            if package(imported) != package(module):
                squashed.add_import(importer=package(module), imported=package(imported))
    return squashed


def built_graph(root: Path, monkeypatch) -> grimp.ImportGraph:
    monkeypatch.syspath_prepend(str(root))
    for name in [name for name in sys.modules if name == "rbl" or name.startswith("rbl.")]:
        monkeypatch.delitem(sys.modules, name)
    return grimp.build_graph("rbl")


def test_no_packages_import_each_other(tmp_path, monkeypatch):
    """No cycle between packages either (the catalogue importing the compiler's parser while the
    compiler imports the catalogue was one, with no cycle between modules)."""
    graph = package_graph(built_graph(assemble(tmp_path), monkeypatch))
    assert {"rbl.lang", "rbl.compiler", "rbl.libraries", "rbl.runner"} <= graph.modules
    assert strongly_connected(graph) == []


def test_the_package_check_finds_a_cycle_between_packages(tmp_path, monkeypatch):
    root = assemble(tmp_path, copy=True)
    (root / "rbl" / "lang" / "_upward.py").write_text('"""A cycle."""\n\nfrom ..compiler import space\n')
    cycles = strongly_connected(package_graph(built_graph(root, monkeypatch)))
    assert any({"rbl.lang", "rbl.compiler"} <= set(group) for group in cycles), cycles


# what the runner shares with the backends: the protocols and their errors, the proxy's admin API,
# the liveness checks, build notices and SIGTERM-as-interrupt (rbl/runner/backend.py says so)
RUNNER_SEAMS = {"rbl.runner.backend", "rbl.runner.fault_control", "rbl.runner.liveness", "rbl.runner.notices",
                "rbl.runner.interrupts"}


def runner_imports_of_backends(graph: grimp.ImportGraph) -> set[tuple[str, str]]:
    return {(module, imported) for module in graph.modules if module.startswith("rbl.backends")
            for imported in graph.find_modules_directly_imported_by(module) if imported.startswith("rbl.runner.")}


def test_the_backends_import_only_the_runners_seams(tmp_path, monkeypatch):
    found = runner_imports_of_backends(built_graph(assemble(tmp_path), monkeypatch))
    assert found and {imported for _, imported in found} <= RUNNER_SEAMS, sorted(found)


def test_the_seam_check_sees_a_backend_reaching_past_the_seams(tmp_path, monkeypatch):
    root = assemble(tmp_path, copy=True)
    (root / "rbl" / "backends" / "_past.py").write_text('"""Past the seams."""\n\nfrom ..runner import executor\n')
    found = runner_imports_of_backends(built_graph(root, monkeypatch))
    assert ("rbl.backends._past", "rbl.runner.executor") in found


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="a")
    graph.add_import(importer="b", imported="c")
    assert strongly_connected(graph) == [["a", "b"]]


def code_words(source: str) -> list[tuple[int, str]]:
    """(line, word) for every name and string of the code, docstrings and comments left out."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append((node.lineno, node.value))
        elif isinstance(node, (ast.Name, ast.Attribute, ast.alias, ast.ImportFrom, ast.FunctionDef, ast.ClassDef,
                               ast.arg)):
            word = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None) \
                or getattr(node, "module", None) or getattr(node, "arg", None)
            words.append((getattr(node, "lineno", 0), word or ""))
    return words


def test_the_runner_and_the_store_name_no_backend():
    """The run loop and the store never ask which backend they have (prose may name one)."""
    named = [f"{path.relative_to(REPO)}:{line}: {word!r}"
             for path in sorted((REPO / "rbl" / "runner").rglob("*.py")) + sorted((REPO / "rbl" / "store").rglob("*.py"))
             for line, word in code_words(path.read_text()) if BACKEND_WORDS.search(word)]
    assert named == []


def test_the_backend_check_sees_code_and_not_prose():
    source = '"""Runs on docker too."""\nimport os  # kubernetes\nif os.environ["B"] == "docker":\n    pass\n'
    assert [word for _, word in code_words(source) if BACKEND_WORDS.search(word)] == ["docker"]


def test_no_code_cites_an_issue_number():
    """Issue numbers mean nothing to a reader of the code: say what and why instead."""
    cited = []
    for folder in ("rbl", "clients", "bench", "scripts", "templates", "tools"):
        for path in sorted((REPO / folder).rglob("*")):
            if not path.is_file() or {"node_modules", "target", "__pycache__"} & set(path.parts):
                continue
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            cited += [f"{path.relative_to(REPO)}:{number}" for number, line in enumerate(text.splitlines(), 1)
                      if re.search(r"\bissues? #?\d+", line, re.IGNORECASE)]
    assert cited == []
