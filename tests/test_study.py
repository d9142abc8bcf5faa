"""A study remembers what defines it: a resume with another objective, metric, direction or fixed
value is refused (exit 2, nothing written); budget and resources change freely; a changed space warns."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import ROOT, cli

SPEC = """
    study: real
    objective: "{toy}:objective"
    output: {out}
    budget: {{trials: 4}}
    sampler: {{name: random, seed: 0}}
    pruner: none
    fixed: {{epochs: 3, dataset: cifar10}}
    space:
      lr: {{float: [1.0e-4, 1.0], log: true}}
    """


def beyond_unread_keys(stderr: str) -> str:
    """stderr without the unread-key warning (the toy objective ignores fixed.dataset, on purpose here)."""
    return "".join(line for line in stderr.splitlines(True) if not line.startswith("trial: the objective never read config key(s)"))


def load(tmp_path, name="real"):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'runs' / name / 'study.db'}")


@pytest.mark.slow
def test_a_smoke_run_with_other_fixed_values_is_refused_when_the_real_run_resumes(write_spec, tmp_path):
    spec = write_spec(SPEC)
    smoke = cli("run", str(spec), "--trials", "2", "--set", "fixed.epochs=1", "--set", "fixed.dataset=synthetic", "--quiet")
    assert smoke.returncode == 0, smoke.stderr
    before = load(tmp_path)
    attrs = dict(before.user_attrs)

    real = cli("run", str(spec), "--quiet")
    assert real.returncode == 2, real.stdout + real.stderr
    [line] = real.stderr.strip().splitlines()
    assert line.startswith(
        f"error: {spec}: study 'real' in sqlite:///{tmp_path / 'runs' / 'real' / 'study.db'} was run with another definition"
    )
    assert 'fixed.dataset: "synthetic" -> "cifar10"; fixed.epochs: 1 -> 3' in line
    assert "--study NEW" in line and "--resume-anyway" in line
    assert "resuming" not in real.stdout
    after = load(tmp_path)
    assert len(after.trials) == 2 and after.user_attrs == attrs  # nothing written
    assert after.user_attrs["definition"]["fixed"] == {"epochs": 1, "dataset": "synthetic"}

    anyway = cli("run", str(spec), "--quiet", "--resume-anyway")
    assert anyway.returncode == 0, anyway.stderr
    assert "continuing with another definition (--resume-anyway): fixed.dataset" in anyway.stderr
    assert "resuming at 2/4" in anyway.stdout
    study = load(tmp_path)
    assert [t.user_attrs["config"]["epochs"] for t in study.trials] == [1, 1, 3, 3]  # each trial keeps what it ran with
    assert study.user_attrs["definition"]["fixed"] == {"epochs": 3, "dataset": "cifar10"}
    assert study.user_attrs["definition_history"][0]["fixed"] == {"epochs": 1, "dataset": "synthetic"}
    again = cli("run", str(spec), "--quiet", "--trials", "5")  # the spec's definition is the study's now
    assert again.returncode == 0 and beyond_unread_keys(again.stderr) == "", again.stderr


@pytest.mark.slow
def test_another_objective_and_metric_are_named_old_and_new(write_spec, tmp_path):
    spec = write_spec(SPEC)
    assert cli("run", str(spec), "--trials", "1", "--quiet").returncode == 0
    seeded = ROOT / "tests" / "fixtures" / "seeded.py"
    other = cli("run", str(spec), "--quiet", "--set", f"objective={seeded}:objective", "--set", "metric=train_loss")
    assert other.returncode == 2
    [line] = other.stderr.strip().splitlines()
    toy = ROOT / "tests" / "fixtures" / "toy.py"
    assert f'objective: "{toy}:objective" -> "{seeded}:objective"; metric: "val_acc" -> "train_loss"' in line
    flipped = cli("run", str(spec), "--quiet", "--set", "direction=minimize")
    assert flipped.returncode == 2
    assert "direction: the stored study 'real' has directions ['maximize'], the spec says ['minimize']" in flipped.stderr
    assert "--study NEW" in flipped.stderr
    worker = cli("worker", str(spec), "--quiet", "--set", "fixed.epochs=2")  # a worker joins the same way
    assert worker.returncode == 2 and "fixed.epochs: 3 -> 2" in worker.stderr
    assert len(load(tmp_path).trials) == 1


@pytest.mark.slow
def test_budget_sampler_and_resources_change_freely_and_a_changed_space_warns_once(write_spec, tmp_path):
    spec = write_spec(SPEC)
    assert cli("run", str(spec), "--trials", "1", "--quiet").returncode == 0
    freely = cli(
        "run",
        str(spec),
        "--quiet",
        "--trials",
        "2",
        "--timeout",
        "100",
        "--max-failures",
        "3",
        "--set",
        "sampler.name=tpe",
        "--set",
        "resources.cpus_per_trial=1",
    )
    assert freely.returncode == 0 and beyond_unread_keys(freely.stderr) == "", freely.stderr
    wider = cli(
        "run",
        str(spec),
        "--quiet",
        "--trials",
        "3",
        "--set",
        "space.lr={float: [1.0e-5, 1.0], log: true}",
        "--set",
        "space.momentum={float: [0.5, 0.99]}",
    )
    assert wider.returncode == 0, wider.stderr
    assert (
        beyond_unread_keys(wider.stderr).strip()
        == f"warning: {spec}: study 'real': the space changed since its last run: added momentum; changed lr"
    )
    same = cli(
        "run",
        str(spec),
        "--quiet",
        "--trials",
        "4",
        "--set",
        "space.lr={float: [1.0e-5, 1.0], log: true}",
        "--set",
        "space.momentum={float: [0.5, 0.99]}",
    )
    assert same.returncode == 0 and beyond_unread_keys(same.stderr) == "", same.stderr
    narrower = cli("run", str(spec), "--quiet", "--trials", "5")
    assert beyond_unread_keys(narrower.stderr).strip().endswith("the space changed since its last run: removed momentum; changed lr")
    assert sum(t.state == TrialState.COMPLETE for t in load(tmp_path).trials) == 5


@pytest.mark.slow
def test_a_study_from_before_definitions_resumes_and_records_the_definition(write_spec, tmp_path):
    spec = write_spec(SPEC)
    (tmp_path / "runs" / "real").mkdir(parents=True)
    old = optuna.create_study(storage=f"sqlite:///{tmp_path / 'runs' / 'real' / 'study.db'}", study_name="real", direction="maximize")
    old.set_user_attr("metric_names", ["val_acc"])
    old.add_trial(optuna.trial.create_trial(value=0.5, params={}, distributions={}, user_attrs={"config": {"epochs": 1}}))
    result = cli("run", str(spec), "--quiet", "--set", "fixed.epochs=2")
    assert result.returncode == 0, result.stderr
    assert "resuming at 1/4" in result.stdout
    assert load(tmp_path).user_attrs["definition"]["fixed"] == {"epochs": 2, "dataset": "cifar10"}
    assert cli("run", str(spec), "--quiet").returncode == 2  # from now on it is checked
