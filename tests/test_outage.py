"""Database outages on a real PostgreSQL server (tests/pgserver.py), with real restarts: workers
ride out a restart and a 4 s stop with one line each and no trial failed or run twice; past
storage.outage_s a worker (or a run with slots) stops with one line, and the next process fails
its trials with a reason that names the storage and retries their configs first. Heartbeats are
1 s with a 3 s grace, shorter than the outage: no false "dead" verdicts either."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from hpsearch.cli import main
from hpsearch.study.storage import redact
from tests.conftest import ROOT, TOY, cli
from tests.pgserver import PASSWORD

FAST_HEARTBEAT = {"HPSEARCH_HEARTBEAT_S": "1", "HPSEARCH_GRACE_S": "3", "PYTHONUNBUFFERED": "1"}


def write(tmp_path: Path, trials: int, epochs: int, extra: str = "") -> tuple[Path, str]:
    study = f"outage-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"study: {study}\nobjective: {TOY}:objective\noutput: {tmp_path / 'runs'}\nbudget: {{trials: {trials}}}\n"
        f"pruner: none\nfixed: {{epochs: {epochs}, sleep: 0.25}}\nspace: {{lr: {{float: [1.0e-4, 1.0], log: true}}}}\n{extra}"
    )
    return spec, study


def worker(spec: Path, url: str, env: dict[str, str] | None = None, command: tuple[str, ...] = ("worker",)) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hpsearch.cli", *command, str(spec), "--storage", url, "--quiet"],
        cwd=ROOT,
        env={**os.environ, **FAST_HEARTBEAT, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def trials(url: str, study: str) -> list[FrozenTrial]:
    try:
        return optuna.load_study(study_name=study, storage=url).get_trials()
    except KeyError:
        return []


def wait_mid_trial(url: str, study: str, procs: list[subprocess.Popen], running: int = 1) -> None:
    """Until ``running`` trials have reported an epoch: the outage then surely hits them mid-way."""
    end = time.monotonic() + 120
    while sum(t.state == TrialState.RUNNING and bool(t.intermediate_values) for t in trials(url, study)) < running:
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        assert time.monotonic() < end, "no trial started"
        time.sleep(0.2)


def outlast_the_limit(pg_server, proc: subprocess.Popen) -> str:
    """Stop the server until ``proc`` gives up; its output, checked: exit 2, one line, no password."""
    pg_server.stop()
    try:
        out = proc.communicate(timeout=120)[0]
    finally:
        pg_server.start()
    assert proc.returncode == 2, out
    assert "Traceback" not in out and PASSWORD not in out
    return out


@pytest.mark.slow
def test_workers_ride_out_a_restart_and_a_4_s_stop_with_nothing_failed_or_run_twice(pg_server, tmp_path):
    spec, study = write(tmp_path, trials=4, epochs=12)  # ~3 s a trial: every outage hits running trials
    procs = [worker(spec, pg_server.url) for _ in range(2)]
    wait_mid_trial(pg_server.url, study, procs)
    pg_server.restart()  # pg_ctl restart -m fast: every connection is cut
    time.sleep(1)
    pg_server.stop()
    time.sleep(4)  # longer than the 3 s grace: a beat the outage blocked must not read as a dead worker
    pg_server.start()
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    print(*outputs, sep="\n")

    for p, out in zip(procs, outputs, strict=True):
        assert p.returncode == 0, out
        assert "Traceback" not in out and PASSWORD not in out
        assert out.count("storage unreachable, retrying for up to 120 s") <= 2  # one line per outage
    assert any("storage unreachable, retrying for up to 120 s" in out for out in outputs)
    done = trials(pg_server.url, study)
    assert [t.state for t in done] == [TrialState.COMPLETE] * 4, "\n".join(str(t.user_attrs.get("reason")) for t in done)
    assert not any("retry_of" in t.user_attrs for t in done)  # nothing failed, nothing run twice
    assert all(sorted(t.intermediate_values) == list(range(1, 13)) for t in done)  # every report was written


@pytest.mark.slow
def test_past_the_outage_limit_a_worker_stops_in_one_line_and_its_trial_is_retried_first(pg_server, tmp_path):
    # the limit from the spec; --storage sets storage.url and keeps it
    spec, study = write(tmp_path, trials=2, epochs=12, extra="storage: {outage_s: 2}\n")
    proc = worker(spec, pg_server.url)
    wait_mid_trial(pg_server.url, study, [proc])
    (cut,) = [t for t in trials(pg_server.url, study) if t.state == TrialState.RUNNING]
    out = outlast_the_limit(pg_server, proc)
    (error,) = [line for line in out.splitlines() if line.startswith("error:")]
    assert "unreachable for 2 s (storage.outage_s)" in error and "u:***@127.0.0.1" in error
    assert "invalid data" not in out

    again = cli("worker", str(spec), "--storage", pg_server.url, "--quiet", env=FAST_HEARTBEAT)
    assert again.returncode == 0, again.stdout + again.stderr
    assert PASSWORD not in again.stdout + again.stderr
    done = trials(pg_server.url, study)
    assert done[cut.number].state == TrialState.FAIL
    assert done[cut.number].user_attrs["reason"] == f"failed: storage unreachable for 2 s ({redact(pg_server.url)})"
    (retry,) = [t for t in done if t.user_attrs.get("retry_of") == cut.number]
    assert retry.number == cut.number + 1  # queued before the next worker claimed anything: its first trial
    assert retry.params == cut.params and retry.state == TrialState.COMPLETE
    assert len([t for t in done if t.state == TrialState.COMPLETE]) == 2


@pytest.mark.slow
def test_past_the_outage_limit_a_run_with_slots_leaves_the_storage_as_its_trials_reason(pg_server, tmp_path):
    spec, study = write(tmp_path, trials=4, epochs=12, extra="storage: {outage_s: 2}\nresources: {workers: 2}\n")
    proc = worker(spec, pg_server.url, command=("run",))
    wait_mid_trial(pg_server.url, study, [proc], running=2)  # both slots mid-trial
    cut = [t for t in trials(pg_server.url, study) if t.state == TrialState.RUNNING]
    out = outlast_the_limit(pg_server, proc)
    assert "unreachable for 2 s (storage.outage_s)" in out.strip().splitlines()[-1], out

    again = cli("worker", str(spec), "--storage", pg_server.url, "--quiet", env=FAST_HEARTBEAT)
    assert again.returncode == 0, again.stdout + again.stderr
    done = trials(pg_server.url, study)
    for t in cut:  # the slots' trials: failed for the storage, not "process died", and their configs ran again
        assert done[t.number].user_attrs["reason"] == f"failed: storage unreachable for 2 s ({redact(pg_server.url)})"
        (retry,) = [r for r in done if r.user_attrs.get("retry_of") == t.number]
        assert retry.params == t.params and retry.state == TrialState.COMPLETE
    assert len([t for t in done if t.state == TrialState.COMPLETE]) == 4


def test_validate_names_the_outage_limit_and_the_environment_overrides_the_spec(tmp_path, monkeypatch, capsys):
    spec, _ = write(tmp_path, trials=2, epochs=1, extra="storage: {url: 'postgresql://u:pw@db-host/hp', outage_s: 30}\n")
    monkeypatch.delenv("HPSEARCH_OUTAGE_S", raising=False)
    assert main(["validate", str(spec), "--samples", "1"]) == 0
    assert "storage postgresql://u:***@db-host/hp (outages ridden out for up to 30 s: storage.outage_s)" in capsys.readouterr().out
    monkeypatch.setenv("HPSEARCH_OUTAGE_S", "600")  # an operator's override, for the whole fleet
    assert main(["validate", str(spec), "--samples", "1"]) == 0
    assert "(outages ridden out for up to 600 s: HPSEARCH_OUTAGE_S)" in capsys.readouterr().out


def test_a_connection_invalidated_inside_a_transaction_is_an_outage_and_the_retry_starts_a_new_session(monkeypatch):
    """Seen once in a fresh clone's chaos test: after a database restart a worker's next Optuna
    call failed with SQLAlchemy's "Can't reconnect until invalid transaction is rolled back"
    (wrapped in Optuna's StorageInternalError) and the worker exited 2. It is an outage: retried,
    from a new session."""
    import optuna
    import sqlalchemy.exc

    from hpsearch.study import storage

    def wrapped(exc: BaseException) -> BaseException:
        outer = optuna.exceptions.StorageInternalError("An exception is raised during the commit.")
        outer.__cause__ = exc
        return outer

    invalidated = sqlalchemy.exc.PendingRollbackError(f"{storage.INVALIDATED}.  Please rollback() fully before proceeding")
    assert storage.unreachable(wrapped(invalidated))
    after_flush = sqlalchemy.exc.PendingRollbackError("This Session's transaction has been rolled back due to a previous exception")
    assert not storage.unreachable(wrapped(after_flush))  # a bad statement, not an outage

    monkeypatch.setattr(storage.time, "sleep", lambda s: None)
    calls, resets = [], []

    def call() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise wrapped(invalidated)
        return "ok"

    assert storage.ride_out(call, "postgresql://u:***@db/x", 5, reset=lambda: resets.append(1)) == "ok"
    assert (len(calls), len(resets)) == (2, 1)
