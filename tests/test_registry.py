"""One registry per plug-in kind: the spec, the CLI and the docs site all read it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hpsearch.base.errors import SpecError
from hpsearch.cli import build_parser
from hpsearch.spec.loader import load_spec
from hpsearch.spec.registry import BACKENDS, PRUNERS, RAY_SCHEDULERS, SAMPLERS, TABLES, table

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("key", list(TABLES))
def test_the_docs_show_each_registry_as_it_is(key):
    """docs/spec.md's tables are rendered from the registries when the site is built (docs/hooks.py)."""
    hooks_file = ROOT / "docs" / "hooks.py"
    spec = importlib.util.spec_from_file_location("docs_hooks", hooks_file)
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert "<!-- generated: registries -->" in (ROOT / "docs" / "spec.md").read_text()
    assert table(TABLES[key], key) in hooks.registries()


@pytest.mark.parametrize(
    "key,names", [("sampler.name", SAMPLERS), ("pruner.name", PRUNERS), ("backend", BACKENDS), ("ray.scheduler", RAY_SCHEDULERS)]
)
def test_the_spec_accepts_every_registered_name_and_names_them_when_refusing(tmp_path, key, names):
    spec = tmp_path / "s.yaml"
    spec.write_text("study: s\nobjective: tests/fixtures/toy.py:objective\nspace: {lr: {float: [0.001, 0.1], log: true}}\n")
    for name in names:
        if name == "grid":
            continue  # needs a discrete space
        assert load_spec(spec, [f"{key}={name}"], check_objective=False)
    with pytest.raises(SpecError) as err:
        load_spec(spec, [f"{key}=nope"], check_objective=False)
    assert all(repr(name) in str(err.value) for name in names)


def test_the_cli_offers_exactly_the_registered_backends():
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    (backend,) = [a for a in run._actions if a.dest == "backend"]
    assert list(backend.choices) == list(BACKENDS)
