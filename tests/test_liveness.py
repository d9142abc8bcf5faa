"""Liveness is observed, not guessed: the rules of hpsearch.study.liveness on a real SQLite study,
with a fake clock for the grace period."""

from __future__ import annotations

import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState

from hpsearch.base.errors import UserError
from hpsearch.study.liveness import BEAT, HOST, PROCESS, Heartbeat, Observer, check, identity, intervals, local_verdict, settle, stamp
from hpsearch.study.storage import open_storage, set_attrs


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def study(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    return optuna.create_study(storage=storage, study_name="live", sampler=optuna.samplers.RandomSampler(seed=0))


def running_trial(study, who=None, beat=0, system=None):
    trial = study.ask()
    trial.suggest_float("lr", 1e-4, 1.0, log=True)
    system = {**(system or {}), BEAT: beat} if beat is not None else dict(system or {})
    if who is not None:
        system[PROCESS] = who
    set_attrs(study, trial, user={"worker": "somewhere:1"}, system=system)
    return trial


def beat(study, trial, value):
    set_attrs(study, trial, system={BEAT: value})


def remote():
    return {"host": "another-machine", "boot": "b", "pid": 4242, "start": "1"}


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # reaped: no process has this pid now (a reuse in these microseconds is not plausible)


def states(study):
    return [t.state for t in study.get_trials()]


def test_a_trial_of_a_gone_local_process_is_dead_at_once_and_its_config_is_queued_next(study):
    trial = running_trial(study, identity(dead_pid()))
    clock = Clock()
    ended = check(study, Observer(grace=30, clock=clock))
    assert [d.trial.number for d in ended] == [trial.number]
    assert "is gone" in ended[0].reason and HOST in ended[0].reason
    first, retry = study.get_trials()
    assert first.state == TrialState.FAIL and first.user_attrs["reason"] == ended[0].reason
    assert retry.state == TrialState.WAITING and retry.params == first.params and retry.user_attrs["retry_of"] == first.number
    assert study.ask().number == retry.number  # Optuna hands out WAITING trials first


def test_a_live_local_process_is_never_dead_even_without_beats(study):
    running_trial(study, identity())  # this test's own process
    clock = Clock()
    observer = Observer(grace=30, clock=clock)
    for _ in range(5):
        assert check(study, observer) == []
        clock.sleep(60)
    assert states(study) == [TrialState.RUNNING]


def test_a_remote_trial_dies_only_after_a_full_watched_grace_period_without_a_beat(study):
    trial = running_trial(study, remote(), beat=7)
    clock = Clock()
    observer = Observer(grace=30, clock=clock)
    assert check(study, observer) == []  # first sight: no verdict, however old the beat
    clock.sleep(29.9)
    assert check(study, observer) == []
    clock.sleep(0.2)
    (dead,) = check(study, observer)
    assert dead.trial.number == trial.number and dead.reason == "failed: process died (no heartbeat for 30 s)"


def test_a_beat_that_moves_restarts_the_watch(study):
    trial = running_trial(study, remote(), beat=1)
    clock = Clock()
    observer = Observer(grace=30, clock=clock)
    check(study, observer)
    clock.sleep(25)
    beat(study, trial, 2)  # one beat, however coarse the database's timestamps
    assert check(study, observer) == []
    clock.sleep(25)  # 50 s since first sight, 25 s since the beat moved
    assert check(study, observer) == []
    clock.sleep(6)
    assert len(check(study, observer)) == 1


def test_a_trial_that_never_got_an_identity_is_judged_by_its_beat(study):
    running_trial(study, who=None)
    clock = Clock()
    observer = Observer(grace=5, clock=clock)
    check(study, observer)
    clock.sleep(5)
    assert len(check(study, observer)) == 1


def test_a_running_trial_of_an_older_ray_driver_is_judged_by_its_beat(study):
    """Ray drivers before issue #41 marked their trials "unwatched", with no identity and no beat: a killed one's
    trials stayed RUNNING for good. Now they are judged like any trial without an identity."""
    running_trial(study, who=None, beat=None, system={"hpsearch:unwatched": True})
    clock = Clock()
    observer = Observer(grace=5, clock=clock)
    assert check(study, observer) == []  # first sight: no verdict
    clock.sleep(5)
    (dead,) = check(study, observer)
    assert dead.reason == "failed: process died (no heartbeat for 5 s)"
    assert states(study) == [TrialState.FAIL, TrialState.WAITING]


def test_a_zombie_is_a_dead_process():
    """A process that ended but was not reaped (pid 1 of some containers never reaps) still has a /proc entry."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    who = identity(proc.pid)  # stamped while it runs
    deadline = time.monotonic() + 60
    while open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":  # it exits at once; not reaped until wait()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert local_verdict(who) is False
    finally:
        proc.wait()


def test_one_heartbeat_beats_for_every_trial_it_holds_until_dropped(study):
    """A Ray driver beats for all the trials it asked for, each with its own counter."""
    first, second = running_trial(study, beat=0), running_trial(study, beat=0)
    heart = Heartbeat(study, interval=0.05)
    heart.add(first._trial_id)
    heart.add(second._trial_id)

    def beats():
        return [t.system_attrs[BEAT] for t in study.get_trials(deepcopy=False)]

    deadline = time.monotonic() + 60

    def wait_until(second_at: int) -> None:
        while beats()[1] < second_at:
            assert time.monotonic() < deadline, beats()
            time.sleep(0.05)

    try:
        wait_until(2)
        assert beats()[0] >= 1  # the first beats too (written just before the second, in the same round)
        heart.drop(first._trial_id)
        now = beats()[1]
        wait_until(now + 2)  # one whole round after the drop: a write of the first that was under way has landed
        held = beats()[0]
        wait_until(now + 4)
        assert beats()[0] == held  # dropped: no more beats
    finally:
        heart.stop()


def test_a_reused_pid_is_another_program():
    me = identity()
    assert local_verdict(me) is True
    assert local_verdict({**me, "start": "1"}) is False  # same pid, another start time: the trial's process is gone
    assert local_verdict({**me, "boot": "another boot"}) is None  # not this machine's boot: only beats can tell
    assert local_verdict(remote()) is None


def test_settle_on_resume_decides_every_running_trial_and_says_so_in_one_line(study):
    gone = running_trial(study, identity(dead_pid()))
    far_dead = running_trial(study, remote(), beat=3)
    far_alive = running_trial(study, {**remote(), "pid": 99}, beat=3)
    clock = Clock()
    lines: list[str] = []

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        beat(study, far_alive, int(clock.now))  # the live one keeps beating

    ended = settle(study, Observer(grace=10, clock=clock), lines.append, sleep=sleep)
    assert sorted(d.trial.number for d in ended) == [gone.number, far_dead.number]
    assert clock.now - 1000.0 >= 10  # it watched a full grace period before calling the silent one dead
    assert lines[0].startswith(f"trial(s) {far_dead.number}, {far_alive.number} RUNNING elsewhere: watching their heartbeats")
    assert lines[-1].endswith("configs retried next") and len(lines) == 2
    left = {t.number: t.state for t in study.get_trials()}
    assert left[far_alive.number] == TrialState.RUNNING
    assert [t.state for t in study.get_trials() if t.number > far_alive.number] == [TrialState.WAITING] * 2


def test_a_config_whose_process_keeps_dying_is_retried_at_most_three_times(study):
    running_trial(study, identity(dead_pid()))
    observer = Observer(grace=30, clock=Clock())
    for _ in range(4):
        check(study, observer)
        waiting = [t for t in study.get_trials() if t.state == TrialState.WAITING]
        if waiting:
            trial = study.ask()  # the retry, claimed by a process that dies too
            set_attrs(study, trial, system={PROCESS: identity(dead_pid()), BEAT: 0})
    assert [t.state for t in study.get_trials()] == [TrialState.FAIL] * 4  # the first run and 3 retries
    assert len({t.params["lr"] for t in study.get_trials()}) == 1


def test_stamp_records_worker_identity_and_a_first_beat(study):
    trial = study.ask()
    stamp(study, trial)
    frozen = study.get_trials()[0]
    assert frozen.system_attrs[PROCESS]["pid"] == identity()["pid"] and frozen.system_attrs[BEAT] == 0
    assert frozen.user_attrs["worker"].startswith(f"{HOST}:")


def test_the_environment_sets_the_intervals_and_bad_values_are_one_line(monkeypatch):
    monkeypatch.setenv("HPSEARCH_HEARTBEAT_S", "0.5")
    monkeypatch.setenv("HPSEARCH_GRACE_S", "2")
    assert intervals() == (0.5, 2.0)
    monkeypatch.setenv("HPSEARCH_GRACE_S", "0.5")
    with pytest.raises(UserError, match="must be longer than HPSEARCH_HEARTBEAT_S"):
        intervals()
