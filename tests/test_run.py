"""`hpsearch run` end to end through the CLI: storage, pruning, TensorBoard, resume, user objectives."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import cli

TOY_SPEC = """
    # toy study
    study: toy
    objective: "{toy}:objective"
    output: {out}
    budget: {{trials: 6}}
    sampler: {{name: tpe, seed: 0}}
    pruner: {{name: none}}
    fixed: {{epochs: 3}}
    space:
      lr: {{float: [1e-4, 1.0], log: true}}
      optimizer:
        choice:
          sgd: {{momentum: {{float: [0.5, 0.99]}}}}
          adamw: {{beta1: {{float: [0.8, 0.95]}}}}
    """


def load(tmp_path, name):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'runs' / name / 'study.db'}")


def event_tags(trial_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(trial_dir))
    acc.Reload()
    return set(acc.Tags()["scalars"]), set(acc.PluginTagToContent("hparams"))


@pytest.mark.slow
def test_real_study_on_digits_prunes_and_logs(write_spec, tmp_path):
    spec = write_spec(
        """
        # digits, aggressive pruning
        study: digits
        output: {out}
        budget: {{trials: 5}}
        sampler: {{name: random, seed: 0}}
        pruner: {{name: percentile, percentile: 75, startup_trials: 1, warmup_epochs: 0, trust: null}}
        fixed: {{dataset: digits, model: resnet8, width: 8, epochs: 3, batch_size: 64, threads: 1}}
        space:
          lr: {{float: [1e-4, 0.5], log: true}}
          optimizer:
            choice:
              sgd: {{momentum: {{float: [0.5, 0.95]}}}}
              adamw: {{beta2: {{float: [0.9, 0.999]}}}}
        """
    )
    result = cli("run", str(spec), "--quiet")
    assert result.returncode == 0, result.stderr
    study = load(tmp_path, "digits")
    states = [t.state for t in study.trials]
    assert len(states) == 5 and TrialState.PRUNED in states and TrialState.COMPLETE in states
    pruned = next(t for t in study.trials if t.state == TrialState.PRUNED)
    assert pruned.user_attrs["reason"].startswith("pruned at epoch")
    done = next(t for t in study.trials if t.state == TrialState.COMPLETE)
    assert done.user_attrs["reason"] == "completed" and done.user_attrs["epochs"] == 3
    assert set(done.intermediate_values) == {1, 2, 3}
    assert done.user_attrs["samples_per_s"] > 0 and done.user_attrs["wall_s"] > 0
    assert done.user_attrs["config"]["model"] == "resnet8"
    scalars, hparams = event_tags(tmp_path / "runs" / "digits" / f"trial-{done.number}")
    assert {"train/loss", "val/loss", "val/acc", "train/lr", "perf/samples_per_s", "perf/epoch_time_s", "perf/peak_mem_mb"} <= scalars
    assert "final/val_acc" in scalars and hparams  # the HParams view has this trial
    assert "digits: 5 finished" in result.stdout


@pytest.mark.slow
def test_rerun_resumes_and_stops_at_total_budget(write_spec, tmp_path):
    spec = write_spec(TOY_SPEC)
    first = cli("run", str(spec), "--trials", "4", "--quiet")
    assert first.returncode == 0, first.stderr
    assert len(load(tmp_path, "toy").trials) == 4
    second = cli("run", str(spec), "--quiet")  # budget 6 from the spec: two more, not six
    assert second.returncode == 0, second.stderr
    assert "resuming at 4/6" in second.stdout
    study = load(tmp_path, "toy")
    assert len(study.trials) == 6
    assert len({tuple(sorted(t.params.items())) for t in study.trials}) == 6  # a resume does not replay samples
    third = cli("run", str(spec), "--quiet")
    assert third.returncode == 0 and "budget reached (6/6" in third.stdout
    assert len(load(tmp_path, "toy").trials) == 6


@pytest.mark.slow
def test_user_objective_in_an_arbitrary_file(write_spec, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "my_objective.py").write_text(
        "def fit(config, reporter):\n"
        "    score = 0.0\n"
        "    for epoch in range(1, 4):\n"
        "        score = 1 - abs(config['x'] - 0.3) / epoch\n"
        "        reporter.report(epoch, {'score': score})\n"
        "    return {'score': score}\n"
    )
    spec = write_spec(
        """
        study: mine
        objective: elsewhere/my_objective.py:fit
        metric: score
        output: {out}
        budget: {{trials: 4}}
        space:
          x: {{float: [0, 1]}}
        """
    )
    result = cli("run", str(spec), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    study = load(tmp_path, "mine")
    assert len(study.trials) == 4 and all(t.state == TrialState.COMPLETE for t in study.trials)
    assert study.best_value == pytest.approx(1 - abs(study.best_params["x"] - 0.3) / 3)


@pytest.mark.slow
def test_failing_and_diverging_trials_do_not_stop_the_study(write_spec, tmp_path):
    spec = write_spec(TOY_SPEC)
    result = cli(
        "run",
        str(spec),
        "--quiet",
        "--set",
        "budget.trials=8",
        "--set",
        "sampler.name=random",
        "--set",
        "space.fail_at={choice: [2, 99]}",
        "--set",
        "space.nan_at={choice: [1, 99]}",
    )
    assert result.returncode == 0, result.stderr
    study = load(tmp_path, "toy")
    reasons = [t.user_attrs.get("reason", "") for t in study.trials]
    assert any(r == "failed: RuntimeError: boom at epoch 2" for r in reasons), reasons
    assert any(r.startswith("diverged at epoch 1") for r in reasons), reasons
    diverged = next(t for t in study.trials if t.user_attrs.get("reason", "").startswith("diverged"))
    assert diverged.state == TrialState.PRUNED and diverged.user_attrs["epochs"] == 1
    assert sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in study.trials) == 8


@pytest.mark.slow
def test_quiet_drops_epoch_lines_and_keeps_a_status_line_after_each_trial(write_spec):
    spec = write_spec(TOY_SPEC)
    result = cli("run", str(spec), "--trials", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert not [x for x in lines if " epoch " in x]
    assert [x.split(" | ")[0] for x in lines if " done, " in x] == [
        "toy: 1/2 done, 0 running, 0 pruned, 0 failed",
        "toy: 2/2 done, 0 running, 0 pruned, 0 failed",
    ]
    loud = cli("run", str(spec), "--trials", "3")
    assert len([x for x in loud.stdout.splitlines() if x.startswith("  trial 2 epoch ")]) == 3  # fixed.epochs
