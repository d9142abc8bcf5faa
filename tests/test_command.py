"""A plain argparse training script (tests/outside/train_mlp.py, no hpsearch inside) searched,
pruned, resumed, exported and trained as ``objective: {command: ...}``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from conftest import cli

from hpsearch.spec.loader import SpecError, load_spec
from hpsearch.trial.command import MetricReader, flags, from_entry, parse_mapping
from hpsearch.trial.objective import load_objective
from hpsearch.trial.reporter import Reporter
from hpsearch.trial.run import COMPLETE, FAILED, PRUNED, run_trial

OUTSIDE = Path(__file__).resolve().parent / "outside"
SCRIPT = OUTSIDE / "train_mlp.py"


def objective(extra: str = "", metrics: str = "auto"):
    entry, problems = parse_mapping(
        {"command": f"python train_mlp.py --checkpoint $HPSEARCH_CHECKPOINT {extra}", "metrics": metrics}, OUTSIDE
    )
    assert not problems
    return load_objective(entry)


def running(marker: str) -> list[int]:
    """Pids of processes whose command line holds ``marker`` (a trial folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_pruned_mid_run_ends_the_script(tmp_path: Path) -> None:
    seen: list[int] = []
    reporter = Reporter(
        trial_dir=tmp_path / "t0", checkpoint_path=tmp_path / "t0" / "ckpt.pt", prune_hook=lambda e, m: bool(seen.append(e)) or e >= 2
    )
    outcome = run_trial(objective(), {"epochs": 8, "lr": 0.5}, reporter, ["val_acc"])
    assert outcome.state == PRUNED and outcome.reason == "pruned at epoch 2"
    assert seen == [1, 2] and outcome.epochs == 2 < 8
    assert 0.5 < outcome.metrics["val_acc"] <= 1.0
    assert running(str(tmp_path / "t0")) == []  # the script's process group is gone
    assert "training 8 epochs" in (tmp_path / "t0" / "output.log").read_text()  # its output is kept


@pytest.mark.slow
def test_killed_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    def interrupt(epoch: int, metrics: dict[str, float]) -> None:
        if epoch == 2:
            raise KeyboardInterrupt

    folder, config = tmp_path / "t1", {"epochs": 4, "lr": 0.5, "optimizer": "sgd", "momentum": 0.9}
    # the script waits after epoch 2 (once) until killed: without it, it could save epoch 3's
    # checkpoint before the interrupt's kill arrives (seen once in a fresh clone) and resume at 4
    pausing = objective(f"--pause-after {tmp_path / 'paused'}")
    with pytest.raises(KeyboardInterrupt):
        run_trial(pausing, config, Reporter(trial_dir=folder, checkpoint_path=folder / "ckpt.pt", on_epoch=interrupt), ["val_acc"])
    assert running(str(folder)) == [] and (folder / "ckpt.pt").exists()
    again = Reporter(trial_dir=folder, checkpoint_path=folder / "ckpt.pt")
    resumed = run_trial(pausing, config, again, ["val_acc"])
    assert resumed.state == COMPLETE and [int(h["epoch"]) for h in again.history] == [3, 4]
    whole = run_trial(objective(), config, Reporter(trial_dir=tmp_path / "t2", checkpoint_path=tmp_path / "t2" / "ckpt.pt"), ["val_acc"])
    assert resumed.metrics["val_acc"] == whole.metrics["val_acc"]  # the resumed run is the same run


@pytest.mark.slow
def test_script_failure_is_a_failed_trial_with_its_stderr(tmp_path: Path) -> None:
    folder = tmp_path / "t3"
    outcome = run_trial(objective("--crash-at 2"), {"epochs": 3}, Reporter(trial_dir=folder, checkpoint_path=folder / "c.pt"), ["val_acc"])
    assert outcome.state == FAILED and outcome.epochs == 1
    assert "exited with status 1: RuntimeError: boom at epoch 2" in outcome.reason
    error = (folder / "error.txt").read_text()
    assert "exit status: 1" in error and "boom at epoch 2" in error and "train_mlp.py" in error


def test_a_flag_the_script_rejects_is_a_clear_failure(tmp_path: Path) -> None:
    folder = tmp_path / "t4"
    outcome = run_trial(objective(), {"epochs": 3, "lr_typo": 0.1}, Reporter(trial_dir=folder), ["val_acc"])
    assert outcome.state == FAILED
    assert "the script rejects flags the config passes" in outcome.reason and "--lr_typo=0.1" in outcome.reason


def test_flags_of_a_conditional_config() -> None:
    config = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "amp": True, "sizes": [1, 2], "_min_batch_size": 4, "skip": None}
    assert flags(config) == ["--optimizer=sgd", "--lr=0.1", "--momentum=0.9", "--amp=true", "--sizes=[1, 2]"]


def test_metric_lines_json_kv_and_report_helper(capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    import hpsearch

    hpsearch.report(3, val_acc=np.float32(0.5), loss=2)
    printed = capsys.readouterr().out
    reports: list[tuple[int, dict[str, float]]] = []

    class Sink:
        def report(self, epoch: int, metrics: dict[str, float]) -> None:
            reports.append((epoch, metrics))

    reader = MetricReader(from_entry(parse_mapping({"command": "x"}, OUTSIDE)[0] or ""), OUTSIDE, Sink())
    for line in [
        printed.strip(),
        "lr=0.1 batch_size=32",
        "epoch=4 val_acc=0.75 loss: 1e-3",
        "[7/10] Epoch 5: val_acc 0.8",
        '{"val_acc": 0.9}',
    ]:
        reader.line(line)
    assert reports == [(3, {"val_acc": 0.5, "loss": 2.0}), (4, {"val_acc": 0.75, "loss": 0.001})]
    assert reader.final() == {"val_acc": 0.9, "loss": 0.001, "epochs": 4.0}


def test_bad_command_mapping_is_one_line_per_key(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "study: s\nobjective: {command: 5, metrics: csvv, speed: 2, workdir: tmp,"
        " flags: {form: hydra, booleans: store_true, keys: {seed: {new: 1}}, name: x}}\n"
    )
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    text = str(err.value)
    assert f"{spec}: objective.command: must be a string or a list of strings" in text
    assert (
        f"{spec}: objective.metrics: must be one of auto, json, kv, tensorboard, csv, jsonl, or {{metric: regex}}, got 'csvv'; did you mean 'csv'?"
        in text
    )
    assert f"{spec}: objective.speed: unknown key" in text
    assert f"{spec}: objective.workdir: must be spec (the spec's folder) or trial (a folder per trial), got 'tmp'" in text
    assert f"{spec}: objective.flags.booleans: store_true passes no value; form hydra needs one (json, python, int)" in text
    assert f"{spec}: objective.flags.keys.seed.new: must be true or false, got 1" in text
    assert f"{spec}: objective.flags.name: unknown key; did you mean 'names'?" in text
    result = cli("validate", str(spec))
    assert result.returncode == 2 and "Traceback" not in result.stderr


SPEC = """\
study: outside
objective:
  command: {command}
  metrics: {metrics}
metric: val_acc
budget: {{trials: 2}}
sampler: {{name: random, seed: 1}}
pruner: {{name: median, startup_trials: 1, warmup_epochs: 1, trust: null}}  # the median alone, not the trust gate
fixed: {{epochs: 4}}
space:
  lr: {{float: [1.0e-5, 1.0], log: true}}
warm_start: [{{lr: 0.5}}, {{lr: 1.0e-5}}]
"""


@pytest.mark.slow
@pytest.mark.parametrize("metrics", ["kv", "tensorboard"])
def test_search_export_train_an_outside_script(tmp_path: Path, metrics: str) -> None:
    """Trial 0 learns (lr 0.5); trial 1 (lr 1e-5) is below it at epoch 2 and pruned; the exported best
    trains again under `hpsearch train` to the same val_acc."""
    (tmp_path / "train_mlp.py").write_text(SCRIPT.read_text())
    command = "python train_mlp.py --checkpoint $HPSEARCH_CHECKPOINT" + (" --tb-dir $HPSEARCH_TB_DIR" if metrics == "tensorboard" else "")
    (tmp_path / "spec.yaml").write_text(SPEC.format(command=json.dumps(command), metrics=metrics))
    ran = cli("run", "spec.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    study = optuna.load_study(study_name="outside", storage=f"sqlite:///{tmp_path / 'runs' / 'outside' / 'study.db'}")
    best, low = study.trials
    assert best.state == optuna.trial.TrialState.COMPLETE and best.user_attrs["epochs"] == 4
    assert low.state == optuna.trial.TrialState.PRUNED and low.user_attrs["epochs"] < 4
    assert sorted(best.intermediate_values) == [1, 2, 3, 4]
    assert cli("export", "spec.yaml", "-o", "best.yaml", cwd=tmp_path).returncode == 0
    trained = cli("train", "best.yaml", "-o", "final", cwd=tmp_path)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "training python train_mlp.py" in trained.stdout
    final = json.loads((tmp_path / "final" / "metrics.json").read_text())
    assert final["val_acc"] == pytest.approx(best.value, abs=1e-6)
    assert yaml.safe_load((tmp_path / "best.yaml").read_text())["config"]["lr"] == 0.5


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["slots", "ray"])
def test_the_script_runs_in_slots_and_under_ray(tmp_path: Path, backend: str) -> None:
    (tmp_path / "train_mlp.py").write_text(SCRIPT.read_text())
    setting = "resources: {workers: 2}" if backend == "slots" else "backend: ray\nresources: {gpus_per_trial: 0}"
    (tmp_path / "spec.yaml").write_text(
        "study: where\nobjective: {command: python train_mlp.py --log json}\nbudget: {trials: 2}\n"
        f"{setting}\nfixed: {{epochs: 2}}\nspace:\n  lr: {{float: [0.1, 0.5]}}\n"
    )
    ran = cli("run", "spec.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    study = optuna.load_study(study_name="where", storage=f"sqlite:///{tmp_path / 'runs' / 'where' / 'study.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2
    assert all(0.5 < t.value <= 1.0 and sorted(t.intermediate_values) == [1, 2] for t in study.trials)
    logs = sorted((tmp_path / "runs" / "where").glob("trial-*/output.log"))
    assert len(logs) == 2 and all('"epoch": 2' in p.read_text() for p in logs)
    if backend == "ray":
        assert "ray: the objective's printed output is in " in ran.stdout


@pytest.mark.slow
def test_the_docs_command_example_runs_as_written(tmp_path: Path) -> None:
    """docs/your-code.md's train.py and search.yaml, as a reader copies them."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "your-code.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:] + text.split("```yaml\n")[1:]]
    script = next(b for b in blocks if b.startswith("# train.py"))
    spec = next(b for b in blocks if b.startswith("# search.yaml"))
    (tmp_path / "train.py").write_text(script)
    (tmp_path / "search.yaml").write_text(spec)
    ran = cli("run", "search.yaml", "--set", "budget.trials=2", "--set", "fixed.epochs=2", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    study = optuna.load_study(study_name="mine", storage=f"sqlite:///{tmp_path / 'runs' / 'mine' / 'study.db'}")
    assert len(study.trials) == 2 and all(t.state == optuna.trial.TrialState.COMPLETE and t.value < 1 for t in study.trials)
    assert all(t.value == pytest.approx(1 - t.params["lr"] / 2, abs=1e-4) for t in study.trials)


def _wait_for(path: Path, seconds: float = 240) -> str:
    import time

    deadline = time.monotonic() + seconds
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)
    return path.read_text()


def _epochs(run: Path) -> int:
    history = run / "history.jsonl"
    return len(history.read_text().splitlines()) if history.exists() else 0


@pytest.mark.slow
def test_train_killed_with_sigkill_resumes_from_the_scripts_checkpoint(tmp_path: Path) -> None:
    """kill -9 of `hpsearch train` takes the script with it; the same command again resumes at epoch 3."""
    import os
    import signal
    import subprocess
    import time

    (tmp_path / "train_mlp.py").write_text(SCRIPT.read_text())
    entry, _ = parse_mapping(
        {"command": f"python train_mlp.py --checkpoint $HPSEARCH_CHECKPOINT --pause-after {tmp_path / 'paused'}"}, tmp_path
    )
    doc = {"objective": entry, "metric": ["val_acc"], "direction": ["maximize"], "config": {"epochs": 4, "lr": 0.5}}
    (tmp_path / "best.yaml").write_text(yaml.safe_dump(doc))
    train = subprocess.Popen(
        [sys.executable, "-m", "hpsearch.cli", "train", "best.yaml", "-o", "run"], cwd=tmp_path, start_new_session=True
    )
    script = int(_wait_for(tmp_path / "paused"))  # the script has saved epoch 2 and sleeps
    deadline = time.monotonic() + 120
    while _epochs(tmp_path / "run") < 2:  # ... and hpsearch has logged it
        assert time.monotonic() < deadline, "epoch 2 never logged"
        time.sleep(0.2)
    os.kill(train.pid, signal.SIGKILL)
    train.wait(timeout=60)
    deadline = time.monotonic() + 30
    while running(str(tmp_path / "run")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert running(str(tmp_path / "run")) == [], f"script {script} outlived hpsearch"
    again = cli("train", "best.yaml", "-o", "run", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming" in again.stdout and "(2 of 4 epochs done)" in again.stdout
    history = [json.loads(line)["epoch"] for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    assert history == [1, 2, 3, 4]
    whole = run_trial(
        objective(), {"epochs": 4, "lr": 0.5}, Reporter(trial_dir=tmp_path / "w", checkpoint_path=tmp_path / "w" / "c.pt"), ["val_acc"]
    )
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["val_acc"] == whole.metrics["val_acc"]
