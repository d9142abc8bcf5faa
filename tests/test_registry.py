"""One registry per plug-in kind: the spec, the CLI and the README all read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpsearch.base.errors import SpecError
from hpsearch.cli import build_parser
from hpsearch.spec.loader import load_spec
from hpsearch.spec.registry import BACKENDS, PRUNERS, RAY_SCHEDULERS, SAMPLERS, TABLES, table

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("key", list(TABLES))
def test_the_readme_shows_each_registry_as_it_is(key):
    assert table(TABLES[key], key) in (ROOT / "README.md").read_text(), f"README out of date: python -m hpsearch.spec.registry prints {key}"


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
