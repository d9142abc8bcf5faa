"""hpsearch train: the exported trial trains to the same metric, and a killed run resumes.

A tiny real study (digits, mlp, 2 epochs, 3 trials, one torch thread) is run once per module.
On CPU with fixed seeds and one thread the objective is deterministic, so the tolerance on
val_acc and val_loss is abs 1e-6 (val_acc moves in steps of 1/144 on digits' 144 val images).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from hpsearch.cli import main

ROOT = Path(__file__).resolve().parents[1]
DIES = ROOT / "tests" / "fixtures" / "dies.py"
TOL = 1e-6

SPEC = """
study: tiny
output: {out}
budget: {{trials: 3}}
pruner: none
sampler: {{name: random, seed: 0}}
fixed: {{dataset: digits, model: mlp, epochs: 2, batch_size: 64, seed: 0, threads: 1}}
space:
  lr: {{float: [0.01, 0.3], log: true}}
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, dict]:
    """(spec path, the best trial as `hpsearch best --json` prints it)."""
    import torch

    threads = torch.get_num_threads()  # the objective's threads: 1 is process-wide; give it back after
    tmp = tmp_path_factory.mktemp("tiny")
    spec = tmp / "tiny.yaml"
    spec.write_text(textwrap.dedent(SPEC).format(out=tmp / "runs"))
    assert main(["run", str(spec), "--quiet"]) == 0
    best = _best(spec)
    yield spec, best
    torch.set_num_threads(threads)


def _best(spec: Path) -> dict:
    from hpsearch.reading import results
    from hpsearch.spec.loader import load_spec

    s = load_spec(spec, check_objective=False)
    return results.best_json(results.load_study(s), s)["best"][0]


def _metrics(run_dir: Path) -> dict[str, float]:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.slow
def test_export_then_train_reproduces_the_trial(study, tmp_path, capsys):
    spec, best = study
    exported, run_dir = tmp_path / "best.yaml", tmp_path / "run"
    assert main(["export", str(spec), "-o", str(exported)]) == 0
    assert main(["train", str(exported), "-o", str(run_dir)]) == 0
    out = capsys.readouterr().out
    got, want = _metrics(run_dir), best["metrics"]
    assert got["val_acc"] == pytest.approx(want["val_acc"], abs=TOL)
    assert got["val_loss"] == pytest.approx(want["val_loss"], abs=TOL)
    assert 0.5 < got["test_acc"] <= 1.0  # evaluate_test: digits has a held-out test split
    assert (run_dir / "model.pt").stat().st_size > 0 and list(run_dir.glob("events.out.tfevents.*"))
    assert "epoch 2/2:" in out and f"final: val_acc={got['val_acc']:.4g}" in out


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_checkpoint(study, tmp_path, capsys):
    spec, _ = study
    exported = tmp_path / "best.yaml"
    assert main(["export", str(spec), "-o", str(exported), "--set", "epochs=4"]) == 0
    doc = yaml.safe_load(exported.read_text())
    doc["objective"] = f"{DIES}:train"  # the built-in objective, plus a SIGKILL after a checkpoint
    exported.write_text(yaml.safe_dump(doc))

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main(["train", str(exported), "-o", str(whole), "--quiet"]) == 0

    env = {**os.environ, "HPSEARCH_TEST_DIE_AFTER": "2", "PYTHONUNBUFFERED": "1"}
    first = subprocess.run(
        [sys.executable, "-m", "hpsearch.cli", "train", str(exported), "-o", str(killed)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert "epoch 2/4:" in first.stdout and "epoch 3/4:" not in first.stdout
    assert not (killed / "metrics.json").exists()

    capsys.readouterr()
    assert main(["train", str(exported), "-o", str(killed)]) == 0
    out = capsys.readouterr().out
    assert "from its checkpoint (2 of 4 epochs done)" in out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("epoch ")] == ["epoch 3/4", "epoch 4/4"]
    assert [json.loads(line)["epoch"] for line in (killed / "history.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    assert _metrics(killed)["val_loss"] == pytest.approx(_metrics(whole)["val_loss"], abs=TOL)
    assert _metrics(killed)["val_acc"] == pytest.approx(_metrics(whole)["val_acc"], abs=TOL)


def test_a_finished_or_different_run_dir_is_refused(study, tmp_path, capsys):
    spec, _ = study
    exported, run_dir = tmp_path / "best.yaml", tmp_path / "run"
    assert main(["export", str(spec), "-o", str(exported), "--set", "epochs=1"]) == 0
    assert main(["train", str(exported), "-o", str(run_dir), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["train", str(exported), "-o", str(run_dir)]) == 2
    assert "holds a finished run (metrics.json); pass --fresh" in capsys.readouterr().err
    assert main(["train", str(exported), "-o", str(run_dir), "--set", "epochs=2", "--fresh", "--quiet"]) == 0
    assert _metrics(run_dir)["epochs"] == 2
    (run_dir / "metrics.json").unlink()
    assert main(["train", str(exported), "-o", str(run_dir), "--set", "lr=0.5"]) == 2
    assert "holds a run of another config (differs in epochs, lr)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"objective": "no_such_module:train"}, "objective: no module named 'no_such_module'"),
        ({"config": {"model": "resnet9000", "epochs": 1}}, "config: unknown model 'resnet9000'"),
    ],
)
def test_a_bad_exported_file_is_a_one_line_error(study, tmp_path, capsys, edit, message):
    spec, _ = study
    exported = tmp_path / "best.yaml"
    assert main(["export", str(spec), "-o", str(exported)]) == 0
    exported.write_text(yaml.safe_dump({**yaml.safe_load(exported.read_text()), **edit}))
    capsys.readouterr()
    assert main(["train", str(exported)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {exported}: {message}")
