"""The package's imports follow ARCHITECTURE.md's "Where things live" table: a module imports
only its own folder and the folders its row names, never one that imports it back, and the two
engines never import each other. The table is read from the page, so page and rule cannot drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.imports import find_cycle

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hpsearch"
TOP = "hpsearch"  # the row of hpsearch/*.py: the package's own __init__, __main__ and data


def table() -> dict[str, set[str]]:
    """Folder -> the folders it may import, from the page's table."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            name = cells[0].strip("`").removesuffix("/")
            rows[TOP if name == "hpsearch/*.py" else name] = set(re.findall(r"`(\w+)`", cells[2]))
    return rows


def folder(module: str) -> str:
    """The table's row of a module: hpsearch.<folder>.*, objectives, or the package's top."""
    parts = module.split(".")
    if parts[0] == "objectives" or parts[:2] == ["hpsearch", "objectives"]:
        return "objectives"
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else TOP


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


def graph(typing_too: bool = False) -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports(path) if m in files and m != name} for name, path in files.items()}


def forbidden(edges: dict[str, set[str]], rows: dict[str, set[str]]) -> list[str]:
    """Imports of a folder its row does not name."""
    return sorted(
        f"{a} -> {b}" for a, targets in edges.items() for b in targets if folder(b) != folder(a) and folder(b) not in rows[folder(a)]
    )


def test_every_import_is_one_the_table_allows():
    edges = graph()
    assert "hpsearch.engine.optuna" in edges and "hpsearch.study.open" in edges
    assert forbidden(edges, table()) == []


def test_every_folder_has_a_row_and_the_rows_make_no_loop():
    rows = table()
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert set(rows) == folders | {TOP, "objectives"}
    assert all(set(allowed) <= set(rows) for allowed in rows.values()), rows
    assert find_cycle(rows) is None, " -> ".join(find_cycle(rows) or [])


def test_the_check_finds_a_planted_import_the_table_does_not_allow():
    edges = {"hpsearch.spec.loader": {"hpsearch.engine.optuna"}, "hpsearch.engine.optuna": {"hpsearch.spec.loader"}}
    assert forbidden(edges, table()) == ["hpsearch.spec.loader -> hpsearch.engine.optuna"]


def test_the_import_graph_has_no_cycle():
    edges = graph()
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges) or [])


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_backends_never_import_each_other():
    edges = graph()
    ray = {m for m in edges if m == "hpsearch.engine.ray" or m.startswith("hpsearch.engine.ray.")}
    assert len(ray) > 1 and "hpsearch.engine.optuna" in edges
    for a, b in (({"hpsearch.engine.optuna"}, ray), (ray, {"hpsearch.engine.optuna"})):
        for name in a:
            assert not edges[name] & b, f"{name} imports {edges[name] & b}"


def test_type_only_imports_make_no_loop_either():
    """A loop through ``if TYPE_CHECKING:`` imports is still a loop a reader must untangle."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text())
        found = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.module in files}
        edges[name] = found - {name}
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges) or [])


def test_optuna_private_names_stay_in_storage():
    """Optuna's private API (``_trial_id``, ``_storage``, ``optuna.storages._rdb``...) is used in
    hpsearch/study/storage.py only, so an Optuna upgrade breaks one file."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "storage.py":
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(n, ast.Attribute)
                and ast.unparse(n.value) != "self"
                and n.attr in {"_trial_id", "_storage", "_study_id", "_get_trials", "_cached_frozen_trial"}
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{n.lineno} .{n.attr}")
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("optuna") and "._" in n.module:
                offenders.append(f"{path.relative_to(ROOT)}:{n.lineno} {n.module}")
    assert offenders == []


def test_objectives_use_only_what_their_row_allows():
    """The built-in recipe is user-side code: the training parts, base and the spec's value parser, never the engine."""
    allowed = table()["objectives"]
    for path in (ROOT / "objectives").rglob("*.py"):
        for m in imports(path):
            assert folder(m) in allowed, f"{path.name} imports {m}"


@pytest.mark.parametrize("module", ["hpsearch.cli", "hpsearch.spec.loader", "hpsearch.spec.registry"])
def test_commands_that_do_not_train_do_not_import_torch_or_ray(module):
    import subprocess
    import sys

    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'ray') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_pyproject_lists_every_package_and_installs_objectives_under_hpsearch():
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {module_name(p) for p in PACKAGE.rglob("__init__.py")}
    assert set(setuptools["packages"]) == on_disk | {"hpsearch.objectives"}
    assert setuptools["package-dir"] == {"hpsearch.objectives": "objectives"}


SMALL = [PACKAGE, ROOT / "objectives", ROOT / "bench"]


def test_no_module_over_500_lines_and_no_function_over_80():
    too_long = []
    for path in (p for root in SMALL for p in root.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(ROOT)
        if len(text.splitlines()) > 500:
            too_long.append(f"{where}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 80:
                too_long.append(f"{where}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert too_long == []


def test_bench_stays_within_its_4000_lines():
    """Issue #40 took bench/ from 6,912 lines to 4,000 (its Python and gpu_check.sh): new work there replaces, not adds."""
    files = [p for p in (ROOT / "bench").rglob("*") if p.suffix in (".py", ".sh")]
    assert sum(len(p.read_text().splitlines()) for p in files) <= 4000
