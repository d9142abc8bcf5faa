"""What a user sees when things go wrong mid-study: kill -9, Ctrl-C, many processes on one
SQLite file, out of memory, crashing objectives, leaked passwords. Each scenario is a row of
RELIABILITY.md. Heartbeats are shortened (1 s beat, 3 s grace) through the environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.trial import FrozenTrial, TrialState

from hpsearch.study.storage import open_storage
from tests.conftest import ROOT, cli

FAULTY = ROOT / "tests" / "fixtures" / "faulty.py"
FAST_HEARTBEAT = {"HPSEARCH_HEARTBEAT_S": "1", "HPSEARCH_GRACE_S": "3", "PYTHONUNBUFFERED": "1"}
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

SLOW_SPEC = """
    # {trials} toy trials of about 1 s each (5 epochs x 0.2 s)
    study: slow
    objective: "{toy}:objective"
    output: {out}
    budget: {{trials: {trials}}}
    sampler: {{name: random, seed: 0}}
    pruner: none
    fixed: {{epochs: 5, sleep: 0.2}}
    space:
      lr: {{float: [1.0e-4, 1.0], log: true}}
    """


HANG = ("sleep: 0.2}}", "sleep: 0.2, hang_once: {out}/hang}}")  # the 2nd trial hangs after its first epoch, once: surely mid-trial


def trials_of(tmp_path: Path, study: str) -> list[FrozenTrial]:
    db = tmp_path / "runs" / study / "study.db"
    if not db.exists():
        return []
    try:  # open_storage retries while the run is still creating the file's tables
        storage = open_storage(f"sqlite:///{db}", create=False)
        return optuna.load_study(study_name=study, storage=storage).get_trials()
    except KeyError:  # the study row is not written yet
        return []


def wait_for(what: Callable[[], Any], timeout: float, proc: subprocess.Popen | None = None) -> Any:
    """The first truthy value of ``what()``."""
    end = time.monotonic() + timeout
    while not (found := what()):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended early: {proc.communicate()}")
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.1)
    return found


def hung_trial(tmp_path: Path, study: str) -> Callable[[], FrozenTrial | None]:
    """The trial that hangs after its first epoch (``hang_once``), once its process said who it is."""
    marker = tmp_path / "runs" / "hang"

    def check() -> FrozenTrial | None:
        pid = marker.read_text().strip() if marker.exists() else ""
        if not pid:
            return None
        mine = [
            t
            for t in trials_of(tmp_path, study)
            if t.state == TrialState.RUNNING and t.user_attrs.get("worker", "").endswith(f":{pid}") and t.intermediate_values
        ]
        return mine[0] if mine else None

    return check


def start_run(spec: Path, *args: str) -> subprocess.Popen:
    """``hpsearch run`` as a user starts it from a terminal, where SIGINT is Ctrl-C: also when this test runs in a
    background job, which starts with SIGINT ignored (a child would inherit that, and Python then keeps it ignored)."""
    return subprocess.Popen(
        [sys.executable, "-m", "hpsearch.cli", "run", str(spec), "--quiet", *args],
        cwd=ROOT,
        env={**os.environ, **FAST_HEARTBEAT},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def by_state(trials: list[FrozenTrial], *states: TrialState) -> list[FrozenTrial]:
    return [t for t in trials if t.state in states]


# ---------------------------------------------------------------------------- kill -9


@pytest.mark.slow
def test_kill_9_of_the_run_mid_trial_then_rerun_keeps_done_trials_and_retries_the_killed_config(write_spec, tmp_path):
    spec = write_spec(SLOW_SPEC.replace("{trials}", "4").replace(*HANG))
    proc = start_run(spec)
    wait_for(hung_trial(tmp_path, "slow"), 120, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = trials_of(tmp_path, "slow")
    done_before = {t.number: t.value for t in by_state(before, TrialState.COMPLETE)}
    (killed,) = by_state(before, TrialState.RUNNING)

    again = cli("run", str(spec), "--quiet", env=FAST_HEARTBEAT)  # right away: the killed pid is gone, no waiting
    assert again.returncode == 0, again.stderr
    assert f"resuming at {len(done_before)}/4" in again.stdout
    reason = f"failed: process died (pid {proc.pid} on {socket.gethostname()} is gone)"
    assert f"trial {killed.number} {reason}: config retried next" in again.stdout

    trials = trials_of(tmp_path, "slow")
    dead = trials[killed.number]
    assert dead.state == TrialState.FAIL
    assert dead.user_attrs["reason"] == reason
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == killed.number]
    assert retry.number == len(before), "the killed config is the first trial the rerun runs"
    assert retry.params == killed.params and retry.state == TrialState.COMPLETE
    assert retry.user_attrs["reason"] == "completed"
    assert {t.number: t.value for t in trials if t.number in done_before} == done_before  # nothing lost
    assert len(by_state(trials, *FINISHED)) == 4
    assert not by_state(trials, TrialState.RUNNING, TrialState.WAITING)


@pytest.mark.slow
def test_kill_9_of_one_worker_process_fails_its_trial_and_the_study_still_meets_its_budget(write_spec, tmp_path):
    # Unseeded: with one seed, two slots may sample the same configs, and a retry would be hard to tell apart.
    spec = write_spec(SLOW_SPEC.replace("{trials}", "5").replace("{{name: random, seed: 0}}", "random").replace(*HANG))
    proc = start_run(spec, "--workers", "2")
    victim = wait_for(hung_trial(tmp_path, "slow"), 120, proc)
    os.kill(int(victim.user_attrs["worker"].rsplit(":", 1)[1]), signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err

    again = cli("run", str(spec), "--quiet", "--workers", "2", env=FAST_HEARTBEAT)  # nothing left to do
    assert again.returncode == 0 and "budget reached (5/5" in again.stdout

    trials = trials_of(tmp_path, "slow")
    dead = trials[victim.number]
    # the parent sees its slot die, or the other slot's next claim sees the pid gone first: either tells it
    assert "killed by SIGKILL" in dead.user_attrs["reason"] or "process died (pid " in dead.user_attrs["reason"]
    assert len(by_state(trials, *FINISHED)) == 5
    assert not by_state(trials, TrialState.RUNNING)
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == dead.number]
    assert retry.params == dead.params and retry.state == TrialState.COMPLETE


# ---------------------------------------------------------------------------- Ctrl-C


@pytest.mark.slow
def test_ctrl_c_marks_the_running_trial_interrupted_exits_130_and_retries_it_first_on_resume(write_spec, tmp_path):
    spec = write_spec(SLOW_SPEC.replace("{trials}", "3").replace(*HANG))
    proc = start_run(spec)
    wait_for(hung_trial(tmp_path, "slow"), 120, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert f"to resume, run the same command again: hpsearch run {spec} --quiet" in err
    trials = trials_of(tmp_path, "slow")
    (stopped,) = by_state(trials, TrialState.FAIL)
    assert stopped.user_attrs["reason"] == "interrupted"
    assert not by_state(trials, TrialState.RUNNING)
    (queued,) = by_state(trials, TrialState.WAITING)  # a gentle stop loses no more than kill -9
    assert queued.params == stopped.params and queued.user_attrs["retry_of"] == stopped.number

    again = cli("run", str(spec), "--quiet", env=FAST_HEARTBEAT)
    assert again.returncode == 0, again.stderr
    trials = trials_of(tmp_path, "slow")
    assert len(by_state(trials, *FINISHED)) == 3
    assert trials[queued.number].state == TrialState.COMPLETE, "the interrupted config is the rerun's first trial"


# ---------------------------------------------------------------------------- many processes, one SQLite file


@pytest.mark.slow
def test_four_processes_share_the_default_sqlite_storage_without_lock_errors(write_spec, tmp_path):
    spec = write_spec(
        """
        # 4 processes x 50 one-epoch trials on one study.db (WAL)
        study: busy
        objective: "{toy}:objective"
        output: {out}
        budget: {{trials: 200, max_failures: 1}}
        sampler: random
        pruner: none
        fixed: {{epochs: 1}}
        space:
          lr: {{float: [1.0e-4, 1.0], log: true}}
        """
    )
    start = time.monotonic()
    procs = [start_run(spec) for _ in range(4)]  # a fresh file: the four also race to create its tables
    results = [p.communicate(timeout=400) for p in procs]
    elapsed = time.monotonic() - start
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in out + err and "Traceback" not in err
        assert "Traceback" not in out
    trials = trials_of(tmp_path, "busy")
    assert not by_state(trials, TrialState.FAIL, TrialState.RUNNING, TrialState.WAITING)
    # Every process claims its trials under the study's lock: exactly the budget, none over.
    assert len(trials) == 200
    print(f"4 processes, {len(trials)} trials, 0 failed, {elapsed:.1f} s")


# ---------------------------------------------------------------------------- out of memory


@pytest.mark.slow
def test_out_of_memory_in_a_study_is_recorded_and_the_study_goes_on(write_spec, tmp_path):
    spec = write_spec(
        f"""
        # micro-batch 64 fits after two halvings; oom_above 2 with a floor of 4 never fits
        study: oom
        objective: "{FAULTY}:oom"
        output: {{out}}
        budget: {{{{trials: 4}}}}
        sampler: grid
        pruner: none
        fixed: {{{{epochs: 2, _min_batch_size: 4}}}}
        space:
          batch_size: {{{{choice: [64, 8]}}}}
          oom_above: {{{{choice: [16, 2]}}}}
        """
    )
    result = cli("run", str(spec), "--quiet")
    assert result.returncode == 0, result.stderr
    trials = {(t.params["batch_size"], t.params["oom_above"]): t for t in trials_of(tmp_path, "oom")}
    assert len(trials) == 4
    fitted = trials[(64, 16)]
    assert fitted.state == TrialState.COMPLETE and fitted.user_attrs["oom_retries"] == 2
    assert fitted.user_attrs["config"]["batch_size"] == 16 and fitted.user_attrs["config"]["accum_steps"] == 4
    assert fitted.user_attrs["metrics"]["effective_batch"] == 64
    assert trials[(8, 16)].state == TrialState.COMPLETE and "oom_retries" not in trials[(8, 16)].user_attrs
    for key in ((64, 2), (8, 2)):
        assert trials[key].state == TrialState.FAIL
        assert trials[key].user_attrs["reason"].startswith("failed: out of memory at micro-batch 4")


# ---------------------------------------------------------------------------- crashing objectives


def test_a_crashing_trial_records_its_message_and_the_study_goes_on(write_spec, tmp_path):
    spec = write_spec(
        SLOW_SPEC.replace("{trials}", "4").replace("sleep: 0.2", "sleep: 0").replace("space:", "space:\n      fail_at: {{choice: [2, 99]}}")
    )
    result = cli("run", str(spec), "--quiet")
    assert result.returncode == 0, result.stderr
    trials = trials_of(tmp_path, "slow")
    failed = by_state(trials, TrialState.FAIL)
    assert failed and all(t.user_attrs["reason"] == "failed: RuntimeError: boom at epoch 2" for t in failed)
    assert len(by_state(trials, TrialState.COMPLETE)) == 4


@pytest.mark.slow
def test_trial_after_trial_failing_stops_the_study_with_exit_1_and_a_clear_message(write_spec, tmp_path):
    spec = write_spec(
        f"""
        study: broken
        objective: "{FAULTY}:crash"
        output: {{out}}
        fixed: {{{{message: "CUDA driver not found"}}}}
        space:
          lr: {{{{float: [1.0e-4, 1.0], log: true}}}}
        """
    )
    result = cli("run", str(spec), "--quiet")  # budget.max_failures defaults to 5
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "stopped early: 5 trials failed in a row (budget.max_failures=5); last: failed: RuntimeError: CUDA driver "
        "not found; fix the cause, then run the same command again to resume (or raise --max-failures)"
    )
    assert len(by_state(trials_of(tmp_path, "broken"), TrialState.FAIL)) == 5

    flag = cli("run", str(spec), "--quiet", "--max-failures", "2")
    assert flag.returncode == 1 and "2 trials failed in a row (budget.max_failures=2)" in flag.stderr
    trials = trials_of(tmp_path, "broken")
    assert len(trials) == 7 and all(t.user_attrs["reason"] == "failed: RuntimeError: CUDA driver not found" for t in trials)


# ---------------------------------------------------------------------------- secrets


@pytest.mark.slow
def test_storage_password_is_never_printed(write_spec, tmp_path):
    spec = write_spec(SLOW_SPEC.replace("{trials}", "2"))
    url = "postgresql://hpuser:s3cr3t-pw@127.0.0.1:1/hpsearch"
    for command in ("run", "worker", "best", "trials"):
        result = cli(command, str(spec), "--storage", url)
        assert result.returncode == 2, (command, result.stderr)
        assert "s3cr3t-pw" not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert command == "worker" or "postgresql://hpuser:***@127.0.0.1:1/hpsearch" in result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_password_is_redacted_in_run_output_trials_and_export_provenance(write_spec, tmp_path, postgres_url):  # noqa: F811
    """A real PostgreSQL server (trust auth, so any password is accepted and must still never show)."""
    study = f"secret-{uuid.uuid4().hex[:8]}"
    url = postgres_url.replace("postgresql://postgres@", "postgresql://postgres:s3cr3t-pw@")
    spec = write_spec(SLOW_SPEC.replace("{trials}", "2").replace("study: slow", f"study: {study}").replace("sleep: 0.2", "sleep: 0"))
    run = cli("run", str(spec), "--storage", url)
    assert run.returncode == 0, run.stderr
    trials = cli("trials", str(spec), "--storage", url, "--json")
    best = tmp_path / "best.yaml"
    export = cli("export", str(spec), "--storage", url, "-o", str(best))
    assert export.returncode == 0, export.stderr
    for result in (run, trials, export):
        assert "s3cr3t-pw" not in result.stdout + result.stderr
    assert "storage postgresql://postgres:***@127.0.0.1" in run.stdout
    assert "s3cr3t-pw" not in best.read_text()
    assert yaml.safe_load(best.read_text())["provenance"]["storage"].startswith("postgresql://postgres:***@127.0.0.1")
