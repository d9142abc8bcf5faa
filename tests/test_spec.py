from __future__ import annotations

from pathlib import Path

import pytest

from hpsearch.base.errors import SpecError
from hpsearch.spec.loader import load_spec
from tests.conftest import ROOT

SPACES = sorted((ROOT / "spaces").glob("*.yaml"))


@pytest.mark.parametrize("path", SPACES, ids=[p.name for p in SPACES])
def test_every_shipped_space_validates(path: Path):
    spec = load_spec(path)
    assert spec.tree.params, f"{path.name} has an empty space"
    assert path.read_text().startswith("#"), f"{path.name} must open with a how-to-run header"


def test_shipped_spaces_exist():
    assert {p.name for p in SPACES} >= {"quickstart.yaml", "resnet.yaml"}


def test_all_errors_reported_together(write_spec):
    path = write_spec(
        """
        study: s
        objective: "{toy}:objective"
        budgett: {{trials: 3}}
        sampler: {{name: tpee}}
        pruner: {{name: median, warmup_epochs: -1}}
        space:
          lr: {{float: [1.0, 0.1]}}
          m: {{int: [0, 1], log: true}}
        """
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    lines = info.value.lines
    text = "\n".join(lines)
    assert all(line.startswith(f"{path}: ") for line in lines)
    assert "budgett: unknown key; did you mean 'budget'?" in text
    assert "sampler.name: " in text and "tpee" in text
    assert "pruner.warmup_epochs: " in text
    assert "space.lr.float: low must be < high, got low=1.0 high=0.1" in text
    assert "space.m.int: a log scale needs low > 0, got low=0" in text
    assert len(lines) == 5


def test_overrides_and_defaults(write_spec, tmp_path):
    path = write_spec(
        """
        objective: "{toy}:objective"
        output: {out}
        space:
          lr: {{float: [1e-4, 1], log: true}}
        """
    )
    spec = load_spec(path, ["budget.trials=7", "fixed.epochs=2", "sampler.seed=3"])
    assert spec.study == "spec"  # the file's stem when study: is absent
    assert (spec.budget.trials, spec.fixed, spec.sampler.seed) == (7, {"epochs": 2}, 3)
    assert spec.storage_url == f"sqlite:///{tmp_path / 'runs' / 'spec' / 'study.db'}"
    assert spec.tree.params["lr"].low == 1e-4  # "1e-4" is a string to YAML; read as a number


def test_conflicts_between_fixed_space_and_branches(write_spec):
    path = write_spec(
        """
        objective: "{toy}:objective"
        fixed: {{lr: 0.1}}
        metric: [val_acc, train_loss]
        direction: maximize
        space:
          lr: {{float: [1e-4, 1], log: true}}
          optimizer: {{choice: {{sgd: {{lr: {{float: [0.1, 1]}}}}}}}}
        warm_start:
          - {{lr: 0.01, optimizer: sgd, momentm: 0.9}}
        """
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = "\n".join(info.value.lines)
    assert "fixed.lr: also a parameter in space.lr" in text
    assert "space.optimizer.sgd.lr: 'lr' is also a top-level parameter" in text
    assert "direction: 2 metric(s)" in text
    assert "warm_start[0].momentm: not a parameter of the space" in text


def test_objective_validate_hook_rejects_config(write_spec, tmp_path):
    user = tmp_path / "mine.py"
    user.write_text(
        "def fn(config, reporter):\n    return {'val_acc': 1.0}\n"
        "fn.validate = lambda c: [] if c['opt'] != 'lion' else ['optimizer lion is not supported']\n"
    )
    path = write_spec(
        """
        objective: mine.py:fn
        space:
          opt: {{choice: [sgd, lion]}}
        """
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.lines == [f"{path}: objective mine.py:fn rejects the config: optimizer lion is not supported"]


def test_a_number_without_a_dot_is_a_number_in_a_spec_and_in_set(tmp_path):
    """YAML 1.1 reads 5e-4 as text; a spec, --set and the objective's own entry all read it as a number."""
    path = tmp_path / "s.yaml"
    path.write_text("study: s\nfixed: {weight_decay: 5e-4, big: 1E3, name: e5}\nspace: {lr: {float: [1e-4, 1e-1], log: true}}\n")
    spec = load_spec(path, ["fixed.momentum=9e-1"], check_objective=False)
    assert spec.fixed == {"weight_decay": 5e-4, "big": 1000.0, "name": "e5", "momentum": 0.9}
