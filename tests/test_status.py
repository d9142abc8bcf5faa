"""``hpsearch status SPEC``: budget, best, workers, running trials and failures, read from the storage only."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from hpsearch.cli import main
from hpsearch.reading.status import Running, eta, watch_beats, workers
from hpsearch.reading.status_view import heartbeat_text
from hpsearch.spec.loader import Spec
from hpsearch.study.liveness import BEAT, PROCESS, Observer, identity
from hpsearch.study.storage import open_storage, set_attrs
from tests.conftest import ROOT, TOY, cli

# Trials in a fixed order: 0 completes (best, lr=0.01), 1 fails at epoch 1, 2 completes;
# then the test adds trial 3, RUNNING on another machine at epoch 3 of 6.
SPEC = f"""
study: toy
objective: {TOY}:objective
output: runs
budget: {{trials: 2, max_failures: null}}
pruner: none
sampler: random
fixed: {{epochs: 2}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
  fail_at: {{choice: [0, 1]}}
warm_start:
  - {{lr: 0.01, fail_at: 0}}
  - {{lr: 0.001, fail_at: 1}}
  - {{lr: 0.1, fail_at: 0}}
"""
ELSEWHERE = "gpu-box:4242"  # the worker of the RUNNING trial: a process on another machine


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("status")
    path = folder / "spec.yaml"
    path.write_text(SPEC)
    assert main(["run", str(path), "--quiet"]) == 0
    study = optuna.load_study(study_name="toy", storage=open_storage(f"sqlite:///{folder / 'runs' / 'toy' / 'study.db'}"))
    trial = study.ask()  # what a worker elsewhere has mid-way: claimed, stamped, 3 epochs reported, 7 beats
    for epoch in (1, 2, 3):
        trial.report(0.5, epoch)
    who = {"host": "gpu-box", "boot": "x", "pid": 4242, "start": "1"}
    set_attrs(study, trial, user={"worker": ELSEWHERE, "config": {"epochs": 6, "lr": 0.01}}, system={PROCESS: who, BEAT: 7})
    return path


def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``hpsearch status ARGS`` in this process (as the CLI runs it), with what it printed."""
    capsys.readouterr()
    code = main(["status", *args])
    out, err = capsys.readouterr()
    return code, out, err


def contents(db: Path) -> bytes:
    """The database with its write-ahead log folded in and emptied (by the test's own connection), then its bytes and the log's."""
    gc.collect()  # connections the fixture's writers left open: a last one closing would checkpoint on its own
    with contextlib.closing(sqlite3.connect(db)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = Path(f"{db}-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def rows_after(out: str, title: str) -> list[list[str]]:
    """The rows (split on spaces) of the table whose title starts with ``title``, header dropped."""
    block = out.split(f"\n\n{title}", 1)[1].split("\n\n", 1)[0]
    return [line.split() for line in block.splitlines()[2:]]


@pytest.mark.slow
def test_status_shows_budget_best_workers_running_and_failures(spec: Path, capsys: pytest.CaptureFixture[str]):
    db = spec.parent / "runs" / "toy" / "study.db"
    before = contents(db)
    code, out, err = status(capsys, str(spec))
    assert code == 0, err
    assert "budget: 2/2 done, 1 running, 1 failed; budget reached" in out
    assert "best: val_acc=0.75 (trial 0)" in out  # toy: 1 * (1 - 0.5**2) at lr=0.01
    me = f"{socket.gethostname()}:{os.getpid()}"  # the fixture ran the study in this process
    by_worker = {row[0]: row for row in rows_after(out, "workers")}
    assert by_worker[me][1:4] == ["1", "-", "-"] and by_worker[me][-2:] == ["2", "1"]  # 1 slot, idle, 2 done, 1 failed
    assert by_worker[ELSEWHERE][1:5] == ["1", "3", "7", "in"] and by_worker[ELSEWHERE][-2:] == ["0", "0"]  # runs trial 3, 7 beats
    [running] = rows_after(out, "running")
    assert running[:2] == ["3", "3/6"] and running[3] == ELSEWHERE  # trial 3 at epoch 3 of 6
    [failure] = rows_after(out, "recent failures")
    assert failure[0] == "1" and "failed: RuntimeError: boom at epoch 1" in " ".join(failure)
    assert contents(db) == before  # it wrote nothing


def test_status_json(spec: Path, capsys: pytest.CaptureFixture[str]):
    code, out, err = status(capsys, str(spec), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["budget"]["done"], doc["budget"]["total"], doc["budget"]["running"], doc["budget"]["failed"]) == (2, 2, 1, 1)
    assert doc["best"] == {"metrics": ["val_acc"], "values": [pytest.approx(0.75)], "number": 0, "pareto": 0}
    [running] = doc["running"]
    assert (running["number"], running["epoch"], running["epochs"], running["worker"], running["beat"]) == (3, 3, 6, ELSEWHERE, 7)
    assert {w["name"]: (w["done"], w["failed"]) for w in doc["workers"]}[ELSEWHERE] == (0, 0)
    assert [f["number"] for f in doc["failures"]] == [1] and "boom at epoch 1" in doc["failures"][0]["reason"]


@pytest.mark.slow
def test_missing_study_is_one_line_and_creates_nothing(tmp_path: Path, spec: Path, capsys: pytest.CaptureFixture[str]):
    fresh = tmp_path / "spec.yaml"
    fresh.write_text(SPEC)
    result = cli("status", str(fresh))  # as a user runs it: a fresh process
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no study database at" in result.stderr
    assert not (tmp_path / "runs").exists()
    db = f"sqlite:///{spec.parent / 'runs' / 'toy' / 'study.db'}"
    code, _, err = status(capsys, str(spec), "--storage", db, "--study", "nope")  # the database exists, the study does not
    assert code == 2 and err.count("\n") == 1 and "no study named 'nope'" in err
    names = optuna.get_all_study_names(open_storage(db, read_only=True))
    assert names == ["toy"]


def test_watch_before_the_spec_says_where_it_goes(spec: Path, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_:
        main(["status", "--watch", str(spec)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "put --watch after SPEC" in err


@pytest.mark.slow
def test_watch_refreshes_until_ctrl_c_then_exits_0(spec: Path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpsearch.cli", "status", str(spec), "--watch", "0.2"],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C as in a terminal, also from a background job
    )
    assert proc.stdout is not None
    refreshes = 0
    deadline = time.monotonic() + 120
    while refreshes < 2 and time.monotonic() < deadline:  # two screens: it refreshed
        line = proc.stdout.readline()
        assert line, proc.communicate()
        refreshes += line.startswith("budget:")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert refreshes == 2
    assert proc.returncode == 0 and "Traceback" not in err


@pytest.mark.slow
def test_watch_on_a_terminal_redraws_in_place_until_ctrl_c(spec: Path):
    import pty
    import select

    master, slave = pty.openpty()  # a terminal: rich tables, redrawn by rich.live
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpsearch.cli", "status", str(spec), "--watch", "0.2"],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    while seen.count(b"budget:") < 2 and time.monotonic() < deadline and proc.poll() is None:  # drawn, then redrawn
        if select.select([master], [], [], 0.2)[0]:
            seen += os.read(master, 65536)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    with contextlib.suppress(OSError):  # the rest of the screen (Linux: EIO once the terminal's other end is closed)
        while select.select([master], [], [], 0.2)[0] and (chunk := os.read(master, 65536)):
            seen += chunk
    os.close(master)
    # Ctrl-C can land inside a write, cutting a box-drawing character in two: decode what came whole
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))  # colours and cursor moves removed
    assert screen.count("budget:") >= 2 and "┃ trial ┃" in screen  # a rich table's header
    assert "Traceback" not in screen


def test_watch_keeps_the_last_read_when_a_refresh_fails(spec: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    import sqlalchemy.exc

    from hpsearch.reading import status_view as module

    real, reads, sleeps = module.gather, [], []

    def gather(spec_: Spec, **kwargs: Any) -> module.Status:
        reads.append(1)
        if len(reads) == 2:  # the storage is out of reach for one refresh, e.g. a network blip
            raise sqlalchemy.exc.OperationalError("SELECT", {}, Exception("could not connect to server"))
        return real(spec_, **kwargs)

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(module, "gather", gather)
    monkeypatch.setattr(module.time, "sleep", sleep)
    code, out, err = status(capsys, str(spec), "--watch", "2")
    assert code == 0 and not err
    screens = re.split(r"^toy · ", out, flags=re.MULTILINE)[1:]  # each screen starts with the study's line
    assert len(screens) == 3 and sleeps == [2.0, 2.0, 2.0]
    assert "refresh at" in screens[1] and "could not connect to server" in screens[1] and "showing the read of" in screens[1]
    assert "refresh at" not in screens[2] and "budget: 2/2 done" in screens[2]  # the next refresh reads again


# ---------------------------------------------------------------------------- the numbers, on made-up histories

T0 = datetime(2026, 1, 1, 12, 0, 0)


def made(number: int, state: TrialState, start: float, end: float | None, worker: str = "a:1") -> FrozenTrial:
    """A trial that ran from ``start`` to ``end`` minutes after T0."""
    return FrozenTrial(
        number=number,
        state=state,
        value=0.5 if state == TrialState.COMPLETE else None,
        datetime_start=T0 + timedelta(minutes=start),
        datetime_complete=None if end is None else T0 + timedelta(minutes=end),
        params={},
        distributions={},
        user_attrs={"worker": worker},
        system_attrs={},
        intermediate_values={},
        trial_id=number,
    )


def test_eta_from_the_recent_rate_ignores_a_pause_between_runs():
    # a first run: 5 trials of 1 minute; a 2-hour pause; this run: 6 trials of 1 minute, 3 s apart (one slot), one running now
    first = [made(i, TrialState.COMPLETE, i, i + 1) for i in range(5)]
    this = [made(10 + i, TrialState.COMPLETE, 200 + i + 0.05, 201 + i) for i in range(6)]
    now = T0 + timedelta(minutes=206.5)
    rate, seconds, note = eta([*first, *this, made(20, TrialState.RUNNING, 206, None)], 13, 1, now)
    assert rate == pytest.approx(6 / 6.45)  # 6 finished in the 6.45 minutes of this run
    assert seconds == pytest.approx(13 / (6 / 6.45) * 60)
    assert "over the last 6 finished" in note


def test_eta_unknown_without_enough_data():
    one = [made(0, TrialState.COMPLETE, 0, 1), made(1, TrialState.RUNNING, 1, None)]
    assert eta(one, 5, 1, T0 + timedelta(minutes=2))[1:] == (None, "fewer than 2 trials finished since this run began")
    assert eta(one[:1], 5, 0, T0 + timedelta(minutes=2))[1:] == (None, "no trial is running")


def test_slots_are_the_most_trials_a_host_ran_at_once():
    # host a: two processes, trials back to back in each (at most 2 at once); host b: one process
    trials = [
        made(0, TrialState.COMPLETE, 0, 1, "a:1"),
        made(1, TrialState.COMPLETE, 1, 2, "a:1"),
        made(2, TrialState.PRUNED, 0.5, 1.5, "a:2"),
        made(3, TrialState.RUNNING, 2, None, "a:2"),
        made(4, TrialState.FAIL, 0, 3, "b:9"),
    ]
    rows = {w.name: w for w in workers(trials, T0 + timedelta(minutes=4))}
    assert (rows["a:1"].slots, rows["a:2"].slots, rows["b:9"].slots) == (2, 2, 1)
    assert (rows["a:2"].done, rows["a:2"].running, rows["b:9"].failed) == (1, [3], 1)
    assert next(iter(rows)) == "a:2"  # a worker running a trial is listed first


def beating(number: int, beat: int, who: dict[str, Any]) -> FrozenTrial:
    """A RUNNING trial of process ``who`` at its ``beat``-th heartbeat."""
    trial = made(number, TrialState.RUNNING, 0, None)
    trial.system_attrs.update({PROCESS: who, BEAT: beat})
    return trial


def test_watch_says_whether_the_beat_moved():
    clock = [0.0]
    observer = Observer(grace=30, clock=lambda: clock[0])  # liveness's, as --watch keeps it between refreshes
    elsewhere = {"host": "gpu-box", "boot": "x", "pid": 4242, "start": "1"}

    def seen(beat: int, at: float) -> str:
        clock[0] = at
        r = Running(number=3, epoch=1, epochs=None, started=None, elapsed_s=at + 60, worker="gpu-box:4242", beat=beat)
        watch_beats([beating(3, beat, elsewhere)], [r], observer)
        return heartbeat_text(r)

    assert seen(6, 0) == "6 in 1m00s"  # first sight: no judgement
    assert seen(7, 5) == "7 in 1m05s, moved"
    assert seen(7, 20) == "7 in 1m20s, still 15s"
    assert seen(7, 40) == "7 in 1m40s, still 35s, dead: process died (no heartbeat for 30 s)"


@pytest.mark.slow
def test_a_local_trial_whose_pid_is_gone_is_dead_at_first_sight(spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # liveness's pid rule: a trial stamped by a process on this machine that has exited is dead at
    # once, without watching a grace period; the old screen said nothing until a --watch saw no beat.
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    pid = int(exited.stdout)
    r = Running(number=5, epoch=1, epochs=None, started=None, elapsed_s=90, worker=f"{socket.gethostname()}:{pid}", beat=2)
    watch_beats([beating(5, 2, identity(pid))], [r], Observer(grace=30))
    assert heartbeat_text(r) == f"2 in 1m30s, dead: process died (pid {pid} on {socket.gethostname()} is gone)"
    alive = Running(number=6, epoch=1, epochs=None, started=None, elapsed_s=90, worker="me", beat=2)
    watch_beats([beating(6, 2, identity())], [alive], Observer(grace=30))  # this process: alive
    assert heartbeat_text(alive) == "2 in 1m30s"
    # The same verdict from `hpsearch status` itself, in one look, on a copy of the study with one more trial
    # stamped by that exited process (trial 3 of the fixture runs on another machine: not decided yet).
    db = tmp_path / "copy.db"
    contents(spec.parent / "runs" / "toy" / "study.db")  # folds the write-ahead log in, so the copy is whole
    db.write_bytes((spec.parent / "runs" / "toy" / "study.db").read_bytes())
    copy = optuna.load_study(study_name="toy", storage=open_storage(f"sqlite:///{db}"))
    set_attrs(copy, copy.ask(), user={"worker": f"{socket.gethostname()}:{pid}"}, system={PROCESS: identity(pid), BEAT: 2})
    code, out, err = status(capsys, str(spec), "--storage", f"sqlite:///{db}", "--json")
    assert code == 0, err
    dead = {r["number"]: r["dead"] for r in json.loads(out)["running"]}
    assert dead == {3: None, 4: f"process died (pid {pid} on {socket.gethostname()} is gone)"}
    code, out, err = status(capsys, str(spec), "--storage", f"sqlite:///{db}")
    assert f"dead: process died (pid {pid} on" in out


TRUSTED = f"""
study: trusted
objective: {TOY}:objective
output: runs
budget: {{trials: 8}}
sampler: {{name: random, seed: 1}}
pruner: {{name: median, trust: 0.5, trust_curves: 4}}
fixed: {{epochs: 4}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
"""


@pytest.mark.slow
def test_status_shows_the_pruning_trust_of_each_epoch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The toy's curves rank trials alike at every epoch: once 4 trials completed, each epoch is trusted."""
    path = tmp_path / "trusted.yaml"
    path.write_text(TRUSTED)
    assert main(["run", str(path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["status", str(path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("pruning trust: "))
    assert re.fullmatch(r"pruning trust: epoch 1: rank corr 1\.00 \(\d+ curves\): pruning; epoch 2: .*; epoch 3: .*: pruning", line), line
    assert main(["status", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["trust"]
    assert [r["step"] for r in rows] == [1, 2, 3] and all(r["trusted"] and r["curves"] >= 4 for r in rows)
