"""What a user trips over, through the CLI: a lost traceback, a misnamed metric, paths from another folder."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import ROOT, TOY, cli

MISTAKES = ROOT / "tests" / "fixtures" / "mistakes.py"


def trials(db: Path, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{db}").get_trials()


@pytest.mark.slow
def test_a_raising_objective_shows_the_users_line_and_keeps_the_traceback(write_spec, tmp_path):
    spec = write_spec(
        f"""
        study: momentum
        objective: "{MISTAKES}:forgets_momentum"
        metric: score
        output: {{out}}
        budget: {{{{trials: 2, max_failures: 2}}}}
        space:
          lr: {{{{float: [0.01, 0.1]}}}}
          optimizer: {{{{choice: [adamw]}}}}
        """
    )
    result = cli("run", str(spec), "--quiet")
    assert result.returncode == 1  # two failures in a row: max_failures
    line = next(x for x in result.stdout.splitlines() if x.startswith("trial 0 "))
    assert line.startswith(f"trial 0 failed: KeyError: 'momentum' (at {MISTAKES}:28): ")  # momentum_of's line, not hpsearch's
    error_file = tmp_path / "runs" / "momentum" / "trial-1" / "error.txt"
    text = error_file.read_text()
    assert "in forgets_momentum" in text and "in momentum_of" in text and text.rstrip().endswith("KeyError: 'momentum'")
    assert f"last failure: trial 1 failed: KeyError: 'momentum' (at {MISTAKES}:28); traceback in {error_file}" in result.stdout
    [first, second] = trials(tmp_path / "runs" / "momentum" / "study.db", "momentum")
    assert second.user_attrs["traceback"] == text and second.user_attrs["error_at"] == f"{MISTAKES}:28"
    assert second.user_attrs["reason"] == "failed: KeyError: 'momentum'"  # the reason stays short; the place is beside it


@pytest.mark.slow
def test_a_misnamed_metric_fails_the_first_trial_at_its_first_report_and_stops_the_study(write_spec, tmp_path):
    spec = write_spec(
        f"""
        study: misnamed
        objective: "{MISTAKES}:misnamed"
        metric: score
        output: {{out}}
        budget: {{{{trials: 5}}}}
        fixed: {{{{epochs: 10, calls_dir: "{tmp_path}"}}}}
        space:
          lr: {{{{float: [0.01, 0.1]}}}}
        """
    )
    result = cli("run", str(spec), "--quiet")
    assert result.returncode == 1
    assert (tmp_path / "epochs.txt").read_text().split() == ["1"]  # one epoch of one trial, not 5 trials x 10 epochs
    [trial] = trials(tmp_path / "runs" / "misnamed" / "study.db", "misnamed")
    assert trial.state == TrialState.FAIL
    why = "failed: the first report (epoch 1) has no 'score' (the spec's metric:); it reported ['acc']"
    assert trial.user_attrs["reason"] == why
    assert result.stderr.strip() == (
        f"stopped early: trial 0 {why}; the objective and the spec disagree on the metric, so every trial would fail "
        "the same way; fix the objective, then run the same command again to resume "
        "(or fix the spec's metric: and add --resume-anyway)"
    )
    # the advice works: the spec's metric: fixed, the same study resumes with the flag it names
    spec.write_text(spec.read_text().replace("metric: score", "metric: acc"))
    again = cli("run", str(spec), "--quiet", "--resume-anyway", "--set", "budget.trials=1")
    assert again.returncode == 0, again.stderr
    assert [t.state for t in trials(tmp_path / "runs" / "misnamed" / "study.db", "misnamed")][-1] == TrialState.COMPLETE


@pytest.mark.slow
def test_a_returned_dict_without_the_metric_stops_the_study_too(write_spec, tmp_path):
    spec = write_spec(
        f"""
        study: returns
        objective: "{MISTAKES}:returns_misnamed"
        metric: score
        output: {{out}}
        budget: {{{{trials: 5}}}}
        space:
          lr: {{{{float: [0.01, 0.1]}}}}
        """
    )
    result = cli("run", str(spec), "--quiet", "--workers", "2")  # slots: the parent stops every slot
    assert result.returncode == 1, result.stderr
    assert "objective returned no 'score' (the spec's metric:); it returned ['acc']" in result.stderr
    assert "fix the objective, then" in result.stderr and "metric: and add --resume-anyway" in result.stderr
    assert len(trials(tmp_path / "runs" / "returns" / "study.db", "returns")) <= 2  # at most one per slot


# ---------------------------------------------------------------------------- paths: the spec is the handle


def project(tmp_path: Path) -> Path:
    """project/spec.yaml with a relative objective file and a relative output folder."""
    root = tmp_path / "project"
    (root / "code").mkdir(parents=True)
    (root / "code" / "fit.py").write_text(TOY.read_text())
    (root / "spec.yaml").write_text(
        textwrap.dedent(
            """
        study: handle
        objective: code/fit.py:objective
        output: runs
        budget: {trials: 2}
        fixed: {epochs: 2}
        space:
          lr: {float: [1.0e-3, 0.1], log: true}
        """
        )
    )
    (tmp_path / "elsewhere").mkdir()
    return root


@pytest.mark.slow
def test_the_spec_finds_its_objective_output_and_study_from_any_folder(tmp_path):
    root = project(tmp_path)
    ran = cli("run", "../project/spec.yaml", "--quiet", cwd=tmp_path / "elsewhere")
    assert ran.returncode == 0, ran.stderr
    assert (root / "runs" / "handle" / "study.db").is_file() and not (tmp_path / "elsewhere" / "runs").exists()
    for folder in (tmp_path, root, tmp_path / "elsewhere"):  # read it from anywhere
        best = cli("best", os.path.relpath(root / "spec.yaml", folder), cwd=folder)
        assert best.returncode == 0 and "handle: best val_acc=" in best.stdout, best.stderr
    exported = cli("export", "project/spec.yaml", "-o", "best.yaml", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    trained = cli("train", "../best.yaml", "--quiet", cwd=tmp_path / "elsewhere")  # the run goes beside the study
    assert trained.returncode == 0, trained.stderr
    assert list((root / "runs" / "train").glob("handle-trial*/metrics.json"))


@pytest.mark.slow
def test_paths_given_as_flags_are_relative_to_the_current_folder(tmp_path):
    root = project(tmp_path)
    ran = cli("run", str(root / "spec.yaml"), "--quiet", "--output", "mine", "--set", "budget.trials=1", cwd=tmp_path / "elsewhere")
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "elsewhere" / "mine" / "handle" / "study.db").is_file()
    by_url = cli("best", str(root / "spec.yaml"), "--storage", "sqlite:///mine/handle/study.db", cwd=tmp_path / "elsewhere")
    assert by_url.returncode == 0, by_url.stderr


@pytest.mark.slow
def test_not_found_errors_name_the_absolute_path_they_tried(tmp_path):
    root = project(tmp_path)
    never = cli("best", "project/spec.yaml", cwd=tmp_path)
    assert never.returncode == 2
    assert f"no study database at {root / 'runs' / 'handle' / 'study.db'}" in never.stderr
    (root / "code" / "fit.py").unlink()
    gone = cli("run", "project/spec.yaml", cwd=tmp_path)
    assert gone.returncode == 2
    assert f"objective: file not found: code/fit.py (looked for {root / 'code' / 'fit.py'}; " in gone.stderr
    missing = cli("run", "nope.yaml", cwd=tmp_path)
    assert missing.returncode == 2 and f"nope.yaml: no such file ({tmp_path / 'nope.yaml'})" in missing.stderr
    no_config = cli("train", "nope.yaml", cwd=tmp_path)
    assert no_config.returncode == 2 and f"nope.yaml: no such file ({tmp_path / 'nope.yaml'})" in no_config.stderr


def test_shipped_spaces_write_to_the_runs_folder_of_the_checkout():
    from hpsearch.spec.loader import load_spec

    elsewhere = {}
    for path in sorted((ROOT / "spaces").glob("*.yaml")):
        spec = load_spec(path, check_objective=False)
        if spec.study_dir != ROOT / "runs" / spec.study:  # `make run` and the README's runs/<study>/
            elsewhere[path.name] = f"output: {spec.output} writes to {spec.study_dir}; relative to the spec, runs/ is ../runs"
    assert not elsewhere
