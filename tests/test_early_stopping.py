"""Early stopping in `hpsearch train` (best weights kept, resumable) and the checkpoint_every knob.

Digits, mlp, one thread, constant lr: deterministic on CPU. `min_delta: 0.5` (half of all
accuracy) makes epoch 1 the best one by construction, so the run stops at epoch 2 whatever
the exact numbers on this machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from hpsearch.cli import main
from hpsearch.trial.reporter import Reporter

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = f"{ROOT / 'objectives' / 'image_classification.py'}:train"
DIES = f"{ROOT / 'tests' / 'fixtures' / 'dies.py'}:train"
CONFIG: dict[str, Any] = {
    "dataset": "digits",
    "model": "mlp",
    "epochs": 5,
    "batch_size": 64,
    "seed": 0,
    "threads": 1,
    "schedule": "constant",
    "lr": 0.05,
    "save_model": True,
    "early_stopping": {"patience": 1, "min_delta": 0.5},
}


@pytest.fixture(autouse=True)
def _threads():
    threads = torch.get_num_threads()  # the objective's threads: 1 is process-wide; give it back after
    yield
    torch.set_num_threads(threads)


def write_config(path: Path, objective: str = BUILTIN, **changes: Any) -> Path:
    doc = {"objective": objective, "metric": "val_acc", "direction": "maximize", "config": {**CONFIG, **changes}}
    path.write_text(yaml.safe_dump(doc))
    return path


def _metrics(run_dir: Path) -> dict[str, float]:
    return json.loads((run_dir / "metrics.json").read_text())


def _history(run_dir: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_train_stops_early_and_keeps_the_best_epochs_weights(tmp_path, capsys):
    from hpsearch.objectives.image_classification import build
    from hpsearch.parts.loop import evaluate

    run_dir = tmp_path / "run"
    assert main(["train", str(write_config(tmp_path / "c.yaml")), "-o", str(run_dir)]) == 0
    got, history = _metrics(run_dir), _history(run_dir)
    assert [row["epoch"] for row in history] == [1, 2]  # not the 5 epochs it was given
    assert got["best_epoch"] == 1 and got["stopped_epoch"] == 2 and got["epochs"] == 2  # epochs trained
    assert got["val_acc"] == history[0]["val_acc"] and got["val_loss"] == history[0]["val_loss"]
    out = capsys.readouterr().out
    assert "early stopping: stopped after epoch 2; the final metrics are epoch 1's, as are model.pt's weights" in out

    best = torch.load(run_dir / "model.pt", weights_only=True)
    last = torch.load(run_dir / "model_last.pt", weights_only=True)
    assert not _same(best, last)
    checkpoint = Reporter(checkpoint_path=run_dir / "checkpoint.pt").load_checkpoint()
    assert checkpoint is not None and _same(last, checkpoint["model"])
    run = build(CONFIG)  # reload model.pt and evaluate it: the recorded metrics are its own
    run.raw.load_state_dict(best)
    val_loss, val_acc = evaluate(run.model, run.data.val, run.dtype)
    assert val_acc == pytest.approx(got["val_acc"], abs=1e-9) and val_loss == pytest.approx(got["val_loss"], abs=1e-6)


@pytest.mark.slow
def test_a_run_killed_before_it_stops_resumes_the_count_from_its_checkpoint(tmp_path):
    whole = tmp_path / "whole"
    assert main(["train", str(write_config(tmp_path / "c.yaml")), "-o", str(whole), "--quiet"]) == 0

    killed = tmp_path / "killed"
    config = write_config(tmp_path / "dies.yaml", objective=DIES)
    env = {**os.environ, "HPSEARCH_TEST_DIE_AFTER": "1"}
    first = subprocess.run(
        [sys.executable, "-m", "hpsearch.cli", "train", str(config), "-o", str(killed)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == -signal.SIGKILL, first.stderr
    # epoch 1 (the best) was trained by the killed process: only the checkpoint knows its weights
    assert main(["train", str(config), "-o", str(killed), "--quiet"]) == 0
    assert [row["epoch"] for row in _history(killed)] == [1, 2]
    assert _metrics(killed)["best_epoch"] == 1 and _metrics(killed)["stopped_epoch"] == 2
    assert _metrics(killed)["val_acc"] == _metrics(whole)["val_acc"]
    best = torch.load(killed / "model.pt", weights_only=True)
    assert _same(best, torch.load(whole / "model.pt", weights_only=True))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{patience: 0}", "early_stopping.patience must be an integer >= 1"),
        ("{patience: 2, min_delta: -1}", "early_stopping.min_delta must be a number >= 0"),
        ("{patience: 2, monitor: acc}", "early_stopping.monitor must be one of val_acc, val_loss"),
        ("{patience: 2, patiense: 3}", "early_stopping: unknown key 'patiense'"),
        ("3", "early_stopping must be a mapping"),
    ],
)
def test_a_bad_early_stopping_value_is_a_one_line_error(tmp_path, capsys, value, message):
    run_dir = tmp_path / "run"
    config = write_config(tmp_path / "c.yaml")
    assert main(["train", str(config), "-o", str(run_dir), "--set", f"early_stopping={value}"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not run_dir.exists()


class _Recorder:
    """A reporter that remembers which epochs the objective checkpointed."""

    trial_dir = None

    def __init__(self) -> None:
        self.saved: list[int] = []

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        pass

    def load_checkpoint(self) -> None:
        return None

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        self.saved.append(state["epoch"])


@pytest.mark.parametrize(("every", "saved"), [(1, [1, 2, 3]), (2, [2, 3]), (0, [])])
def test_checkpoint_every_k_epochs_and_at_the_last(every, saved):
    from hpsearch.objectives.image_classification import train

    reporter = _Recorder()
    config = {**CONFIG, "epochs": 3, "early_stopping": None, "save_model": False, "train_subset": 300}
    train({**config, "checkpoint_every": every}, reporter)
    assert reporter.saved == saved


def test_a_bad_checkpoint_every_is_a_one_line_error(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml", checkpoint_every=-1)
    assert main(["train", str(config), "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "c.yaml: config: checkpoint_every must be an integer >= 0, got -1" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
