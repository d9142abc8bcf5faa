"""A sampler or pruner of the user's own, named by import path in the spec, with its keyword arguments."""

from __future__ import annotations

import json
import textwrap

import pytest

from hpsearch.cli import main
from tests.conftest import ROOT

PRUNERS_PY = '''\
"""A user's pruner: stops every trial whose lr is above a limit, at a given epoch."""
import optuna


class LrCeiling(optuna.pruners.BasePruner):
    def __init__(self, max_lr: float, at_epoch: int = 2):
        self.max_lr, self.at_epoch = max_lr, at_epoch

    def prune(self, study, trial) -> bool:
        return trial.last_step == self.at_epoch and trial.params["lr"] > self.max_lr


class NotAPruner:
    pass
'''

SPEC = """\
study: plug
objective: {toy}:objective
budget: {{trials: 8}}
sampler: {{name: random, seed: 3}}
pruner: {{name: "{pruner}", max_lr: 0.01, at_epoch: 2}}
fixed: {{epochs: 4}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "my_pruners.py").write_text(PRUNERS_PY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_spec(folder, pruner: str) -> str:
    spec = folder / "spec.yaml"
    spec.write_text(SPEC.format(toy=ROOT / "tests" / "fixtures" / "toy.py", pruner=pruner))
    return str(spec)


@pytest.mark.parametrize("name", ["my_pruners:LrCeiling", "my_pruners.py:LrCeiling"])
def test_a_user_pruner_class_prunes_a_real_study_by_its_own_rule(folder, capsys, name):
    spec = write_spec(folder, name)
    assert main(["run", spec, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["trials", spec, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 8
    for row in rows:
        high = row["params"]["lr"] > 0.01
        assert row["state"] == ("PRUNED" if high else "COMPLETE"), row
        if high:
            assert row["epochs"] == 2
    assert any(r["state"] == "PRUNED" for r in rows) and any(r["state"] == "COMPLETE" for r in rows)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("my_pruners:NotAPruner", "pruner.name: my_pruners:NotAPruner is a class that does not derive from BasePruner"),
        ("my_pruners:Missing", "pruner.name: my_pruners has no 'Missing'"),
        ("no_such_module:LrCeiling", "pruner.name: no module named 'no_such_module'"),
    ],
)
def test_a_bad_class_is_one_line_naming_file_and_key_and_writes_nothing(folder, capsys, name, fragment):
    spec = write_spec(folder, name)
    assert main(["run", spec, "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {spec}: {fragment}"), err
    assert not (folder / "runs").exists()


def test_keyword_arguments_the_class_does_not_take_are_one_line(folder, capsys):
    spec = write_spec(folder, "my_pruners:LrCeiling")
    text = (folder / "spec.yaml").read_text().replace("at_epoch: 2", "at_epch: 2")
    (folder / "spec.yaml").write_text(text)
    assert main(["validate", spec]) == 2
    err = capsys.readouterr().err.strip()
    assert "pruner.name: my_pruners:LrCeiling(max_lr=0.01, at_epch=2) failed: TypeError" in err


def test_a_user_sampler_class_gets_its_kwargs_and_the_spec_seed(folder, capsys):
    (folder / "my_samplers.py").write_text(
        textwrap.dedent(
            """\
            import optuna

            class Quasi(optuna.samplers.QMCSampler):
                def __init__(self, seed=None, scramble=True):
                    super().__init__(seed=seed, scramble=scramble, warn_independent_sampling=False)
            """
        )
    )
    spec = folder / "s.yaml"
    spec.write_text(
        f"study: q\nobjective: {ROOT / 'tests' / 'fixtures' / 'toy.py'}:objective\nbudget: {{trials: 3}}\n"
        "sampler: {name: 'my_samplers:Quasi', seed: 1, scramble: false}\nfixed: {epochs: 1}\n"
        "space:\n  lr: {float: [1.0e-4, 1.0], log: true}\n"
    )
    assert main(["validate", str(spec)]) == 0
    assert "sampler my_samplers:Quasi" in capsys.readouterr().out
    assert main(["run", str(spec), "--quiet"]) == 0


def test_a_misspelt_registry_name_still_says_did_you_mean(folder, capsys):
    spec = write_spec(folder, "hyperbnd")
    assert main(["validate", spec]) == 2
    err = capsys.readouterr().err
    assert "pruner.name: Input should be 'median'" in err and "did you mean 'hyperband'?" in err
