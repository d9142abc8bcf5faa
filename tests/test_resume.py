"""A killed trial continues from its checkpoint: kill -9 mid-trial, run again, the retry takes the
dead trial's epochs over (history, TensorBoard, pruner steps) and trains only what was missing."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml
from optuna.trial import TrialState
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.conftest import ROOT, cli
from tests.test_reliability import FAST_HEARTBEAT, by_state, start_run, trials_of, wait_for

RESUMABLE = ROOT / "tests" / "fixtures" / "resumable.py"
EPOCHS, HANG_AT = 5, 3  # killed after training epoch 3, before its checkpoint: the checkpoint holds epoch 2

BUILTIN = """
    study: resume
    objective: "{fixture}:builtin"
    output: {out}
    budget: {{trials: 3}}
    sampler: {{name: random, seed: 0}}
    pruner: median
    fixed: {{dataset: digits, model: mlp, mlp_hidden: [32], epochs: EPOCHS, batch_size: 64, threads: 1,
            count: {out}/epochs.log, marker: {out}/hang, hang_at: HANG_AT}}
    space:
      lr: {{float: [0.01, 0.1], log: true}}
    """.replace("EPOCHS", str(EPOCHS)).replace("HANG_AT", str(HANG_AT))
USER = (
    BUILTIN.replace(":builtin", ":user")
    .replace("dataset: digits, model: mlp, mlp_hidden: [32], ", "")
    .replace("batch_size: 64, threads: 1,", "")
)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["builtin", "user", "user-in-a-slot"])
def test_a_trial_killed_mid_way_resumes_from_its_checkpoint_and_trains_at_most_one_epoch_again(objective, write_spec, tmp_path):
    text = (BUILTIN if objective == "builtin" else USER).replace("{fixture}", str(RESUMABLE))
    slots = objective == "user-in-a-slot"
    spec = write_spec(text + ("resources: {{workers: 2}}\n" if slots else ""))
    runs = tmp_path / "runs"
    proc = start_run(spec)
    pid = int(wait_for(lambda: (runs / "hang").exists() and (runs / "hang").read_text(), 120, proc))
    if slots:  # one slot process dies; the run replaces it and the retry resumes within the same run
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        trials = trials_of(tmp_path, "resume")
        (killed,) = [t for t in trials if t.user_attrs.get("worker", "").endswith(f":{pid}")]
        # the parent sees its slot die, or another slot's claim sees the pid gone first: either tells it
        assert killed.state == TrialState.FAIL
        assert "killed by SIGKILL" in killed.user_attrs["reason"] or f"process died (pid {pid} " in killed.user_attrs["reason"]
    else:  # the run itself dies; running it again resumes
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        (killed,) = by_state(trials_of(tmp_path, "resume"), TrialState.RUNNING)
        again = cli("run", str(spec), env=FAST_HEARTBEAT)
        assert again.returncode == 0, again.stderr
        out = again.stdout
    assert sorted(killed.intermediate_values) == [1, 2, 3]
    trials = trials_of(tmp_path, "resume")
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == killed.number]
    assert f"trial {retry.number} resumes trial {killed.number} from its epoch 2 checkpoint" in out, out
    assert retry.state == TrialState.COMPLETE and retry.params == killed.params
    assert retry.user_attrs["resumed_from"] == {"trial": killed.number, "epoch": 2}
    # One curve, epochs 1..n, no step twice: the history, the pruner's steps and TensorBoard.
    assert [int(h["epoch"]) for h in retry.user_attrs["history"]] == list(range(1, EPOCHS + 1))
    assert sorted(retry.intermediate_values) == list(range(1, EPOCHS + 1))
    assert [h["val_acc"] for h in retry.user_attrs["history"][:2]] == [killed.intermediate_values[1], killed.intermediate_values[2]]
    events = EventAccumulator(str(runs / "resume" / f"trial-{retry.number}")).Reload()
    assert [e.step for e in events.Scalars("val/acc")] == list(range(1, EPOCHS + 1))
    # The epoch arithmetic: the killed config trained epochs 1-3, then 3-5 again: n + 1 epochs, not n + k.
    trained = [line.split() for line in (runs / "epochs.log").read_text().splitlines()]
    assert [int(e) for lr, e in trained if float(lr) == killed.params["lr"]] == [1, 2, 3, 3, 4, 5]
    assert len(by_state(trials, TrialState.COMPLETE, TrialState.PRUNED)) == 3
    # Only the best trial keeps its checkpoint.
    best = max(by_state(trials, TrialState.COMPLETE), key=lambda t: t.value)
    assert sorted(p.parent.name for p in (runs / "resume").glob("trial-*/checkpoint.pt")) == [f"trial-{best.number}"]
    if objective == "user":  # export names the kept checkpoint: the best trial's trained state
        exported = cli("export", str(spec), "-o", str(tmp_path / "best.yaml"))
        assert exported.returncode == 0, exported.stderr
        doc = yaml.safe_load((tmp_path / "best.yaml").read_text())
        assert doc["provenance"]["trial"] == best.number
        assert Path(doc["provenance"]["checkpoint"]) == (runs / "resume" / f"trial-{best.number}" / "checkpoint.pt").resolve()
