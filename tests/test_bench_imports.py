"""bench/ is one package whose imports go one way: no import cycle among its modules (imports
inside functions and under ``if TYPE_CHECKING:`` count), one import style (absolute
``from bench.x import y``, no private names across modules), and no ``sys.path`` edits in bench/
or tests/: a script runs as ``python -m bench.<name>`` from the checkout's root."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.imports import find_cycle

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in BENCH.rglob("*.py")}


def imported(tree: ast.AST) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every import in the file, wherever it sits; name None for ``import x``."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found += [(node.lineno, "." * node.level + (node.module or ""), a.name) for a in node.names]
    return found


def graph() -> dict[str, set[str]]:
    """bench module -> the bench modules it imports (``from bench.quality import stats`` is
    bench.quality and bench.quality.stats)."""
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = set()
        for _, module, attr in imported(ast.parse(path.read_text())):
            targets |= {m for m in (module, f"{module}.{attr}") if m in MODULES}
        edges[name] = targets - {name}
    return edges


def test_bench_modules_import_each_other_without_a_cycle():
    edges = graph()
    assert "bench.quality.registry" in edges["bench.quality.harness"]  # the graph sees imports at all
    assert "bench.quality.stats" in edges["bench.quality.harness"]
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges) or [])


def test_the_cycle_finder_finds_a_planted_cycle_and_the_graph_a_function_level_import(tmp_path: Path):
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    code = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bench.quality.methods import Trace\ndef f():\n    import bench.common\n"
    assert {m for _, m, _ in imported(ast.parse(code))} == {"typing", "bench.quality.methods", "bench.common"}


def test_tasks_know_no_method_and_methods_no_peer():
    """The search-quality package's direction: tasks <- methods <- peers <- registry <- harness."""
    edges = graph()
    methods_and_up = {"bench.quality.methods", "bench.quality.peers", "bench.quality.ray_methods", "bench.quality.registry"}
    for task_module in ("tasks", "table", "live"):
        assert not edges[f"bench.quality.{task_module}"] & methods_and_up, task_module
    assert not edges["bench.quality.methods"] & (methods_and_up - {"bench.quality.methods"})
    registered = {a for a, targets in edges.items() if "bench.quality.registry" in targets}
    assert "bench.search_quality" in registered and "bench.quality.harness" in registered


def test_one_import_style_absolute_and_no_private_names_across_modules():
    siblings = {name.rsplit(".", 1)[-1] for name in MODULES}  # `from common import ...` was the old style
    offenders = []
    for path in MODULES.values():
        for line, module, attr in imported(ast.parse(path.read_text())):
            where = f"{path.relative_to(ROOT)}:{line}"
            if module.startswith("."):
                offenders.append(f"{where} relative import {module}")
            elif module.split(".")[0] in siblings and not module.startswith("bench"):
                offenders.append(f"{where} {module}: import it as bench.{module}")
            elif module.startswith("bench") and attr and attr.startswith("_"):
                offenders.append(f"{where} private {module}.{attr}")
    assert offenders == []


@pytest.mark.slow
def test_no_sys_path_edits_in_bench_or_tests():
    offenders = []
    for path in [*BENCH.rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("insert", "append") and ast.unparse(node.value) == "sys.path":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
