"""The package's layering as a checked contract: ``lint-imports`` keeps the contracts of
``pyproject.toml`` (layers from the CLI down to the IR core; compiler and emulator independent),
no two files of ``ember_xla`` import each other in a cycle, and no module outside
``ember_xla.cli`` imports it. The file graph is read from the source with ``ast``: every import,
in a function or not, and every ``"ember_xla.…"`` string (what ``importlib`` is handed); imports
under ``if TYPE_CHECKING:`` are annotations and left out."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ember_xla"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(tree: ast.Module, modules: dict[str, Path]) -> dict[str, int]:
    """The ``ember_xla`` modules a file imports -> the first line that does."""
    found: dict[str, int] = {}
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if _type_checking_only(node):
            continue
        stack.extend(ast.iter_child_nodes(node))
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                     else node.module for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("ember_xla.") and node.value in modules:
                names = [node.value]
        for name in names:
            if name in modules:
                found.setdefault(name, node.lineno)
    return found


def _graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    return {m: {t: ln for t, ln in _imported(ast.parse(p.read_text()), modules).items()
                if t != m}
            for m, p in modules.items()}


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one file (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_between_files():
    graph = _graph()
    cycles = _cycles(graph)
    described = ["; ".join(f"{a} -> {b} (line {graph[a][b]})" for a in comp for b in graph[a]
                           if b in comp) for comp in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(described)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [
        ["a", "b", "c"]]


def test_only_the_cli_imports_the_cli():
    offenders = [f"{m} -> {t} (line {ln})" for m, targets in _graph().items()
                 if not (m == "ember_xla.cli" or m.startswith("ember_xla.cli."))
                 for t, ln in targets.items()
                 if t == "ember_xla.cli" or t.startswith("ember_xla.cli.")]
    assert not offenders, "\n".join(offenders)


def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (it is in the 'test' extra)")
    proc = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
