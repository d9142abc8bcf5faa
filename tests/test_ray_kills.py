"""The Ray backend keeps the Optuna backend's promises when its driver is killed or interrupted (a local Ray,
SQLite storage): the cut trials are failed with a reason, their configs retried first (resuming from their
checkpoints), the budget is met exactly, nothing stays RUNNING, and no process of the driver's Ray is left.

Each scenario waits for a trial that hangs mid-way (``hang_at``) before it strikes, however slow the machine."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import FrozenTrial, TrialState

from hpsearch.engine.ray.leftovers import FOLDER, LocalRay, end_leftovers
from hpsearch.study.liveness import identity
from tests.conftest import ROOT, cli
from tests.raycluster import end_session, session_processes, sessions_in
from tests.test_reliability import FAST_HEARTBEAT, FINISHED, by_state, start_run, trials_of, wait_for

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RESUMABLE = ROOT / "tests" / "fixtures" / "resumable.py"
BUDGET = 4
# 3 epochs of 0.5 s; the first trial to report epoch 2 hangs there (before its checkpoint), so the cut
# trial resumes from epoch 1. At most 2 trials at once, 1 where the machine has 1 core.
SPEC = """
study: rk
objective: "{objective}:user"
output: {out}
backend: ray
budget: {{trials: {budget}}}
sampler: {{name: random, seed: 0}}
ray: {{scheduler: fifo}}
resources: {{gpus_per_trial: 0, workers: 2}}
fixed: {{epochs: 3, sleep: 0.5, count: {out}/epochs.log, marker: {out}/hang, hang_at: 2}}
space:
  lr: {{float: [0.01, 0.1], log: true}}
"""


@pytest.fixture
def sessions():
    """The local Ray sessions a test's drivers started; whatever is left of them is ended after the test."""
    started: list[str] = []
    yield started
    left = {session: end_session(session) for session in started if not ends_on_its_own(session)}
    assert not any(left.values()), f"Ray processes left behind: {left}"


def ends_on_its_own(session: str, within_s: float = 60) -> bool:
    """A session whose driver ended cleanly: Ray's workers and agents exit a moment after its
    shutdown, longer on a busy machine; only what is still there after ``within_s`` is left behind."""
    deadline = time.monotonic() + within_s
    while session_processes(session):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def write_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "rk.yaml"
    spec.write_text(SPEC.format(objective=RESUMABLE, out=tmp_path / "runs", budget=BUDGET))
    return spec


def hanging(tmp_path: Path, proc) -> None:
    """Wait until the hanging trial has reported its epoch 2 (its checkpoint holds epoch 1)."""
    marker = tmp_path / "runs" / "hang"
    wait_for(lambda: marker.exists() and marker.read_text(), 300, proc)
    wait_for(lambda: [t for t in trials_of(tmp_path, "rk") if t.state == TrialState.RUNNING and 2 in t.intermediate_values], 60)


def driver_session(proc) -> str:
    """The session folder of the local Ray the driver started, from its first line (read as it is printed)."""
    line = wait_for(proc.stdout.readline, 300, proc)
    (session,) = sessions_in(line)
    return session


def trained(tmp_path: Path) -> list[tuple[float, int]]:
    """(lr, epoch) of every epoch any trial trained, in order."""
    return [(float(lr), int(e)) for lr, e in (line.split() for line in (tmp_path / "runs" / "epochs.log").read_text().splitlines())]


def assert_retried_first_and_resumed(
    tmp_path: Path, cut: list[FrozenTrial], before: list[tuple[float, int]], out: str, reason: str
) -> None:
    """Every cut config ran again first, exactly once, from its newest checkpoint (``before``: the epochs trained
    until the strike), and the study met its budget exactly with nothing left RUNNING or queued."""
    trials = trials_of(tmp_path, "rk")
    retries, resumed = [], []
    for t in cut:
        assert trials[t.number].state == TrialState.FAIL and trials[t.number].user_attrs["reason"] == reason
        (retry,) = [r for r in trials if r.user_attrs.get("retry_of") == t.number]
        assert retry.params == t.params and retry.state == TrialState.COMPLETE
        assert [int(h["epoch"]) for h in retry.user_attrs["history"]] == [1, 2, 3]
        lr = t.params["lr"]
        start = retry.user_attrs.get("resumed_from", {}).get("epoch", 0)
        epochs = [e for x, e in trained(tmp_path) if x == lr]  # a killed driver's Ray worker may finish an epoch as it dies
        assert epochs[len(epochs) - (3 - start) :] == list(range(start + 1, 4))  # the retry trained from its checkpoint on
        assert start >= max([e for x, e in before if x == lr], default=0) - 1 and len(epochs) <= 4  # at most one epoch lost
        if start:
            assert f"trial {retry.number} resumes trial {t.number} from its epoch {start} checkpoint" in out
            resumed.append(retry.number)
        retries.append(retry.number)
    assert resumed, "the hanging trial had checkpointed epoch 1: its retry resumes from it"
    rerun = sorted((t for t in trials if t.datetime_start and t.number > max(c.number for c in cut)), key=lambda t: t.datetime_start)
    assert {r.number for r in rerun[: len(retries)]} == set(retries), "the cut configs are the rerun's first trials"
    assert len(by_state(trials, *FINISHED)) == BUDGET  # the budget, exactly
    assert not by_state(trials, TrialState.RUNNING, TrialState.WAITING)


@pytest.mark.ray
@pytest.mark.slow
def test_kill_9_of_a_ray_driver_then_a_rerun_retries_every_cut_config_and_ends_its_leftover_processes(tmp_path, sessions):
    spec = write_spec(tmp_path)
    proc = start_run(spec)
    sessions.append(driver_session(proc))
    hanging(tmp_path, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survivors = session_processes(sessions[0])  # Ray's agents outlive a killed driver (under pid 1, deaf to SIGTERM)
    before = trained(tmp_path)
    cut = by_state(trials_of(tmp_path, "rk"), TrialState.RUNNING)

    # status, which writes nothing, already reads them as dead: the driver stamped them, and its pid is gone
    host = socket.gethostname()
    status = cli("status", str(spec), "--json", env=FAST_HEARTBEAT)
    assert status.returncode == 0, status.stderr
    reason = f"failed: process died (pid {proc.pid} on {host} is gone)"
    assert {r["number"]: r["dead"] for r in json.loads(status.stdout)["running"]} == {
        t.number: reason.removeprefix("failed: ") for t in cut
    }

    again = cli("run", str(spec), "--quiet", env=FAST_HEARTBEAT)
    assert again.returncode == 0, again.stderr
    sessions.extend(sessions_in(again.stdout))
    print(f"cut {len(cut)} trial(s); {len(survivors)} process(es) outlived the killed driver; the rerun said:\n{again.stdout}")
    if survivors:  # one line, naming those still there (Ray's workers end on their own, a moment after the raylet)
        (line,) = [x for x in again.stdout.splitlines() if "left by the local Ray of a killed run" in x]
        named = re.fullmatch(
            rf"ray: ended \d+ process(?:es)? left by the local Ray of a killed run \(driver pid {proc.pid}\): pids? ([\d, ]+)", line
        )
        assert named and {int(pid) for pid in named.group(1).split(", ")} <= set(survivors), line
    assert not session_processes(sessions[0]), "nothing of the killed driver's Ray is left"
    assert not list((tmp_path / "runs" / "rk" / "ray-local").glob("*.json"))
    assert re.search(rf"trial {cut[0].number} {re.escape(reason)}.*: configs? retried next", again.stdout)
    assert_retried_first_and_resumed(tmp_path, cut, before, again.stdout, reason)

    # status counts the trials that really ran at once (was: the dead RUNNING trials on top of the rerun's)
    at_once = int(re.search(r"(\d+) at once", again.stdout).group(1))
    workers = json.loads(cli("status", str(spec), "--json").stdout)["workers"]
    assert len(workers) == 2 and f"{host}:{proc.pid}" in {w["name"] for w in workers}  # the killed driver and the rerun's
    assert max(w["slots"] for w in workers) <= at_once
    print(f"status: slots {[w['slots'] for w in workers]} with {at_once} at once")


@pytest.mark.ray
@pytest.mark.slow
def test_ctrl_c_of_a_ray_driver_queues_the_cut_configs_and_the_rerun_runs_them_first(tmp_path, sessions):
    """SIGTERM does the same, exit 143: tests/test_ray.py::test_sigterm_of_a_ray_driver_fails_and_queues_its_trials_exit_143."""
    spec = write_spec(tmp_path)
    proc = start_run(spec)
    sessions.append(driver_session(proc))
    hanging(tmp_path, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert 'running trials were marked failed (reason "interrupted") and are retried first' in err
    assert not session_processes(sessions[0]), "the driver shut its Ray down"
    assert not list((tmp_path / "runs" / "rk" / "ray-local").glob("*.json"))
    trials = trials_of(tmp_path, "rk")
    cut = [t for t in by_state(trials, TrialState.FAIL) if t.user_attrs["reason"] == "interrupted"]
    queued = by_state(trials, TrialState.WAITING)  # what the message says: queued, and so retried first
    assert cut and sorted(t.user_attrs["retry_of"] for t in queued) == [t.number for t in cut]
    assert not by_state(trials, TrialState.RUNNING)
    before = trained(tmp_path)

    again = cli("run", str(spec), "--quiet", env=FAST_HEARTBEAT)
    assert again.returncode == 0, again.stderr
    sessions.extend(sessions_in(again.stdout))
    assert_retried_first_and_resumed(tmp_path, cut, before, again.stdout, "interrupted")


def test_the_leftovers_of_a_driver_that_still_runs_or_ran_elsewhere_are_not_touched(tmp_path):
    """Only a dead driver's processes on this machine are ended, and only while they are still those processes."""

    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        folder = tmp_path / FOLDER
        me = LocalRay(tmp_path)  # this process is a live driver: its record stays as it is
        me.processes = {bystander.pid: identity(bystander.pid)}
        me.path.parent.mkdir(parents=True)
        me.path.write_text(json.dumps({"driver": me.driver, "processes": [identity(bystander.pid)]}))
        dead = {**identity(), "pid": 999_999_999}  # a driver of this machine whose pid is gone
        (folder / "dead.json").write_text(
            json.dumps({"driver": dead, "processes": [identity(victim.pid), {**identity(bystander.pid), "start": "1"}]})
        )
        (folder / "elsewhere.json").write_text(json.dumps({"driver": {**dead, "host": "another-machine"}, "processes": []}))
        said: list[str] = []
        assert end_leftovers(tmp_path, said.append) == [victim.pid]  # the bystander's pid, started at another time: not it
        assert victim.wait(timeout=60) == -signal.SIGKILL and bystander.poll() is None
        assert said == [f"ray: ended 1 process left by the local Ray of a killed run (driver pid 999999999): pid {victim.pid}"]
        assert sorted(p.name for p in folder.iterdir()) == sorted([me.path.name, "elsewhere.json"])
    finally:
        for p in (victim, bystander):
            p.kill()
            p.wait()
