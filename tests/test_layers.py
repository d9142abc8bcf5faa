"""The package's imports point one way: no module imports one that imports it back, and the
two engines never import each other (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hpsearch"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """hpsearch modules this file imports anywhere (functions too), except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("hpsearch"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hpsearch"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports(path) if m in files and m != name} for name, path in files.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_has_no_cycle():
    edges = graph()
    assert "hpsearch.backends.optuna" in edges and "hpsearch.study" in edges
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges) or [])


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_backends_never_import_each_other_and_lower_layers_import_no_backend():
    edges = graph()
    backends = {m for m in edges if m.startswith("hpsearch.backends.")}
    for name in backends:
        assert not edges[name] & backends, f"{name} imports {edges[name] & backends}"
    for lower in (
        "hpsearch.study",
        "hpsearch.liveness",
        "hpsearch.slots",
        "hpsearch.devices",
        "hpsearch.storage",
        "hpsearch.spec",
        "hpsearch.registry",
        "hpsearch.trial",
        "hpsearch.reporter",
    ):
        assert not edges[lower] & backends, f"{lower} imports a backend: {edges[lower] & backends}"


@pytest.mark.parametrize("module", ["hpsearch.cli", "hpsearch.spec", "hpsearch.registry"])
def test_commands_that_do_not_train_do_not_import_torch_or_ray(module):
    import subprocess
    import sys

    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'ray') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
