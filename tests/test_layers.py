"""The package's imports point down the layers of ARCHITECTURE.md: a module imports only
modules of its own layer or of lower ones, never one that imports it back, and the two
engines never import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hpsearch"

# Bottom to top. A module may import its own layer and the layers before it, nothing after.
LAYERS = [
    "hpsearch.base",  # errors, text, cores: what every layer uses
    "hpsearch.parts",  # reusable training parts (the built-in objective in objectives/ is built from them)
    "hpsearch.trial",  # run one objective (a function or a command): loader, reporter, TensorBoard, ranks
    "hpsearch.spec",  # typed spec, parameter tree, registries
    "hpsearch.study",  # the shared study: open, counts, definition, warm start, storage, liveness
    "hpsearch.engine",  # optuna and ray backends, slots, devices
    "hpsearch.reading",  # results, export, status, dashboard
    "hpsearch.reruns",  # promote and audit
    "hpsearch.plots",  # plots, importances, the page
    "hpsearch.tools",  # train run, profile, lr-find, describe
    "hpsearch.cli",  # parse, load the spec, call one library function
    "hpsearch",  # the package's own __init__ and __main__
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    """Index in LAYERS of the longest prefix that names the module's layer."""
    matches = [i for i, name in enumerate(LAYERS) if module == name or module.startswith(name + ".")]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches, key=lambda i: len(LAYERS[i]))


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


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets if layer(b) > layer(a))


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


def test_every_import_points_down_the_layers():
    edges = graph()
    assert "hpsearch.engine.optuna" in edges and "hpsearch.study.open" in edges
    assert upward(edges) == []


def test_the_layer_check_finds_a_planted_upward_import():
    edges = {"hpsearch.spec.loader": {"hpsearch.engine.optuna"}, "hpsearch.engine.optuna": {"hpsearch.spec.loader"}}
    assert upward(edges) == ["hpsearch.spec.loader -> hpsearch.engine.optuna"]


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


def test_objectives_use_only_the_training_parts_and_the_spec():
    """The built-in recipe is user-side code: it may use hpsearch.parts, .base and .spec's value
    parser, never the engine."""
    for path in (ROOT / "objectives").rglob("*.py"):
        for m in imports(path):
            assert layer(m) <= LAYERS.index("hpsearch.spec"), f"{path.name} imports {m}"


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


def test_a_module_over_500_lines_says_why_at_its_top():
    for path in PACKAGE.rglob("*.py"):
        if len(path.read_text().splitlines()) > 550:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            assert "Longer than 500 lines on purpose" in doc, f"{path.relative_to(ROOT)}: split it, or say why it is one module"
