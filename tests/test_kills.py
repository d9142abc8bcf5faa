"""Kills and stops of a run with slots (``--workers 2``): kill -9 of the parent leaves its slots'
trials to be read as "process died" and retried first, as without slots; SIGTERM stops a run
during slot start-up even when it was started with SIGINT ignored (`cmd &` in a script)."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time

import pytest
from optuna.trial import TrialState

from tests.conftest import ROOT, cli
from tests.test_reliability import FAST_HEARTBEAT, FINISHED, HANG, SLOW_SPEC, by_state, hung_trial, start_run, trials_of, wait_for


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def children(pid: int) -> list[str]:
    return subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout.split()


@pytest.mark.slow
def test_kill_9_of_the_parent_of_slots_leaves_process_died_and_the_rerun_retries_first(write_spec, tmp_path):
    spec = write_spec(SLOW_SPEC.replace("{trials}", "4").replace("{{name: random, seed: 0}}", "random").replace(*HANG))
    proc = start_run(spec, "--workers", "2")
    victim = wait_for(hung_trial(tmp_path, "slow"), 120, proc)
    slot_pid = int(victim.user_attrs["worker"].rsplit(":", 1)[1])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_for(lambda: gone(slot_pid), 30)  # the kernel ends the slots with their parent (PR_SET_PDEATHSIG)
    assert trials_of(tmp_path, "slow")[victim.number].state == TrialState.RUNNING  # nobody was left to end it

    began = datetime.datetime.now()  # Optuna stores local times
    again = cli("run", str(spec), "--quiet", "--workers", "2", env=FAST_HEARTBEAT)
    assert again.returncode == 0, again.stderr
    trials = trials_of(tmp_path, "slow")
    dead = trials[victim.number]
    assert dead.state == TrialState.FAIL and dead.user_attrs["reason"].startswith(f"failed: process died (pid {slot_pid} ")
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == victim.number]
    assert retry.params == victim.params and retry.state == TrialState.COMPLETE
    claimed = sorted((t for t in trials if t.datetime_start and t.datetime_start >= began), key=lambda t: t.datetime_start)
    assert retry in claimed[:2], "the killed config is among the first trials the rerun's two slots claim"
    assert len(by_state(trials, *FINISHED)) == 4 and not by_state(trials, TrialState.RUNNING)


def test_sigterm_during_slot_start_up_stops_the_run_at_once_even_with_sigint_ignored(write_spec, tmp_path):
    spec = write_spec(SLOW_SPEC.replace("{trials}", "20"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpsearch.cli", "run", str(spec), "--quiet", "--workers", "2"],
        cwd=ROOT,
        env={**os.environ, **FAST_HEARTBEAT},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `cmd &` in a script starts it
    )
    # both slot processes exist: they are starting (importing, opening the study), SIGINT still ignored
    wait_for(lambda: len(children(proc.pid)) == 2, 120, proc)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    # was 15.3 s (slots that ignored SIGINT were waited for, then killed); now slots get 2 s, then SIGKILL
    print(f"stopped {took:.1f} s after SIGTERM")
    assert took < 10, f"stopped {took:.1f} s after SIGTERM"
    trials = trials_of(tmp_path, "slow")
    assert not by_state(trials, TrialState.RUNNING)
    assert len(by_state(trials, *FINISHED)) < 20
