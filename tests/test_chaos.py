"""Chaos on a real PostgreSQL study (tests/pgserver.py): three workers (two `hpsearch worker`s and
an `hpsearch run --workers 2` with two slot processes) on a study of short sleeping trials, under
a seeded schedule of kill -9s of workers and slots, two database restarts and one SIGTERM. Killed
workers are started again at once, as a job scheduler would. The one heavy test of the suite:
about a minute here, bounded at 3 minutes."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from tests.conftest import ROOT, TOY, free_port
from tests.pgserver import PASSWORD
from tests.raycluster import RayCluster, session_processes, sessions_in

pytestmark = [pytest.mark.slow]

BUDGET = 30
ENV = {"HPSEARCH_HEARTBEAT_S": "1", "HPSEARCH_GRACE_S": "4", "PYTHONUNBUFFERED": "1"}
KILLED = ("failed: process died", "interrupted", "failed: slot process killed by SIGKILL")
WALL_S = 180  # the whole test, faults and the end of the study


class Fleet:
    """The workers, each restartable; every byte they print goes to a log file under tmp_path."""

    def __init__(self, tmp_path: Path, spec: Path, url: str):
        self.tmp, self.spec, self.url = tmp_path, spec, url
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.procs: dict[str, subprocess.Popen] = {}
        self.started = 0

    def start(self, name: str) -> None:
        args = ["run", str(self.spec), "--workers", "2"] if name == "slots" else ["worker", str(self.spec)]
        self.started += 1
        log = open(self.logs / f"{name}-{self.started}.log", "w")  # noqa: SIM115 - the child writes it until it ends
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "hpsearch.cli", *args, "--storage", self.url, "--quiet"],
            cwd=ROOT,
            env={**os.environ, **ENV},
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )

    def kill(self, name: str, sig: int) -> None:
        proc = self.procs[name]
        proc.send_signal(sig)
        proc.wait(timeout=60)
        self.start(name)

    def slot_pids(self) -> list[int]:
        parent = self.procs["slots"].pid
        found = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True, check=False).stdout.split()
        return [int(pid) for pid in found]


def trials(url: str, study: str) -> list[FrozenTrial]:
    try:
        return optuna.load_study(study_name=study, storage=url).get_trials()
    except Exception:  # noqa: BLE001 - the study is not created yet, or the server restarts
        return []


def test_chaos_exact_budget_nothing_lost_nothing_twice_no_password(pg_server, tmp_path):
    study = f"chaos-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "chaos.yaml"
    spec.write_text(
        f"study: {study}\nobjective: {TOY}:objective\noutput: {tmp_path / 'runs'}\nbudget: {{trials: {BUDGET}}}\n"
        "sampler: random\npruner: none\nfixed: {epochs: 5, sleep: 0.2}\nspace: {lr: {float: [1.0e-4, 1.0], log: true}}\n"
    )
    rng = random.Random(29)
    faults = ["kill worker", "kill slot", "restart db", "kill worker", "kill slot", "restart db", "sigterm worker"]
    rng.shuffle(faults)
    begun = time.monotonic()
    fleet = Fleet(tmp_path, spec, pg_server.url)
    for name in ("a", "b", "slots"):
        fleet.start(name)
    while len([t for t in trials(pg_server.url, study) if t.state == TrialState.COMPLETE]) < 2:
        assert time.monotonic() - begun < 120, "the fleet never got going"
        time.sleep(0.2)
    injected = []
    for fault in faults:
        time.sleep(rng.uniform(0.5, 2.0))
        if fault == "restart db":
            pg_server.restart()
        elif fault == "kill slot":
            pids = fleet.slot_pids()
            if not pids:
                continue  # the slots are being replaced right now: the next fault is due soon
            os.kill(rng.choice(pids), signal.SIGKILL)
        else:
            fleet.kill(rng.choice(["a", "b"]), signal.SIGTERM if fault == "sigterm worker" else signal.SIGKILL)
        injected.append(fault)
    for name, proc in fleet.procs.items():
        rc = proc.wait(timeout=max(10.0, WALL_S - (time.monotonic() - begun)))
        assert rc == 0, (
            name,
            rc,
            (fleet.logs / f"{name}-{max(int(p.stem.split('-')[1]) for p in fleet.logs.glob(f'{name}-*.log'))}.log").read_text(),
        )
    took = time.monotonic() - begun

    done = trials(pg_server.url, study)
    complete = [t for t in done if t.state == TrialState.COMPLETE]
    failed = [t for t in done if t.state == TrialState.FAIL]
    print(f"{len(injected)} faults injected ({', '.join(injected)}), {len(done)} trials, {len(failed)} killed, lost: 0, {took:.0f} s")
    assert len(complete) == BUDGET  # the budget is exact
    assert not [t for t in done if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert all(r.startswith(KILLED) for r in (t.user_attrs.get("reason", "") for t in failed)), [t.user_attrs for t in failed]
    completed_configs = [t.params["lr"] for t in complete]
    assert len(set(completed_configs)) == BUDGET  # no config ran to completion twice (none without a kill either)
    for t in failed:  # every killed config (one that got as far as its params) ran to completion exactly once more
        if t.params:
            assert completed_configs.count(t.params["lr"]) == 1, t.number
    assert len(injected) >= 5
    produced = [*fleet.logs.rglob("*"), *(tmp_path / "runs").rglob("*")]
    leaked = [p for p in produced if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert not leaked
    assert "storage unreachable, retrying" in "".join(p.read_text() for p in fleet.logs.iterdir())


# ---------------------------------------------------------------------------- Ray

RAY_BUDGET = 16
RAY_CUT = ("failed: process died", "interrupted")  # a dead Ray worker, driver or cluster; a Ctrl-C


class Drivers:
    """One `hpsearch run` at a time on the Ray study, each logged; faults strike while a trial of its own is mid-way."""

    def __init__(self, tmp_path: Path, spec: Path):
        self.tmp, self.spec, self.logs = tmp_path, spec, tmp_path / "logs"
        self.logs.mkdir()
        self.proc: subprocess.Popen | None = None
        self.sessions: list[str] = []  # the local Rays the drivers started
        self.runs, self.local = 0, True

    def start(self, *args: str) -> subprocess.Popen:
        self.runs += 1
        self.local = "--address" not in args
        log = open(self.logs / f"driver-{self.runs}.log", "w")  # noqa: SIM115 - the child writes it until it ends
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hpsearch.cli", "run", str(self.spec), "--quiet", *args],
            cwd=ROOT,
            env={**os.environ, **ENV},
            stdout=log,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        return self.proc

    def log(self) -> str:
        return (self.logs / f"driver-{self.runs}.log").read_text()

    def mid_trial(self) -> None:
        """Wait until a fresh trial of this driver has reported an epoch, once the retries of earlier cuts are done
        (they run first): so a strike cuts fresh configs, and none is cut again and again up to the retry limit.
        Others' RUNNING trials (a killed driver's, awaiting their verdict) do not count."""
        assert self.proc is not None
        me = f"{socket.gethostname()}:{self.proc.pid}"

        def found() -> bool:
            study = self.trials()
            mine = [t for t in study if t.state == TrialState.RUNNING and t.user_attrs.get("worker") == me]
            if any(t.state == TrialState.WAITING for t in study) or any("retry_of" in t.user_attrs for t in mine):
                return False
            return any(t.intermediate_values for t in mine)

        end = time.monotonic() + 240
        while not found():
            assert self.proc.poll() is None, (self.proc.returncode, self.log(), self.proc.stderr.read() if self.proc.stderr else "")
            assert time.monotonic() < end, f"no trial of driver {me} got going: {self.log()}"
            time.sleep(0.1)
        if self.local:
            self.sessions += [s for s in sessions_in(self.log()) if s not in self.sessions]

    def trials(self) -> list[FrozenTrial]:
        return trials(f"sqlite:///{self.tmp / 'runs' / 'rayc' / 'study.db'}", "rayc")

    def end(self, sig: int) -> tuple[int, str]:
        assert self.proc is not None
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, err

    def ray_worker(self) -> int:
        """A Ray worker process of the current local Ray that runs a trial (Tune's trainable actor)."""
        for pid in session_processes(self.sessions[-1]):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::ImplicitFunc"):
                    return pid
        raise AssertionError(f"no Ray worker runs a trial in {self.sessions[-1]}")


@pytest.mark.ray
@pytest.mark.slow
def test_chaos_on_ray_exact_budget_every_cut_config_retried_no_orphans(tmp_path):
    """The Ray backend, one SQLite study of short toy trials, two at once: on a local Ray a Ray worker killed,
    the driver interrupted (SIGINT) and killed (kill -9); then on a `ray start` cluster the driver killed and the
    head restarted under a running driver. Each strike waits for a trial mid-way; each rerun picks up at once."""
    spec = tmp_path / "rayc.yaml"
    spec.write_text(
        f"study: rayc\nobjective: {TOY}:objective\noutput: {tmp_path / 'runs'}\nbackend: ray\nbudget: {{trials: {RAY_BUDGET}}}\n"
        "sampler: random\npruner: none\nray: {scheduler: fifo}\nresources: {gpus_per_trial: 0, workers: 2}\n"
        "fixed: {epochs: 4, sleep: 0.4}\nspace: {lr: {float: [1.0e-4, 1.0], log: true}}\n"
    )
    rng = random.Random(41)
    begun = time.monotonic()
    drivers, faults = Drivers(tmp_path, spec), []
    drivers.start()
    drivers.mid_trial()
    os.kill(drivers.ray_worker(), signal.SIGKILL)
    faults.append("kill -9 of a Ray worker")
    time.sleep(rng.uniform(0.5, 2.0))
    drivers.mid_trial()
    assert drivers.end(signal.SIGINT)[0] == 130
    faults.append("SIGINT of the driver")
    drivers.start()
    drivers.mid_trial()
    assert drivers.end(signal.SIGKILL)[0] == -signal.SIGKILL
    faults.append("kill -9 of the driver")
    cluster = RayCluster(free_port())
    cluster.start()
    try:
        drivers.start("--address", cluster.address)
        drivers.mid_trial()
        assert drivers.end(signal.SIGKILL)[0] == -signal.SIGKILL
        faults.append("kill -9 of the driver on a ray start cluster")
        assert cluster.up(), "the user's cluster outlives a killed driver"
        drivers.start("--address", cluster.address)
        drivers.mid_trial()
        cluster.restart()
        faults.append("head restart under a running driver")
        _, err = drivers.proc.communicate(timeout=180)
        assert drivers.proc.returncode == 2 and "Traceback" not in err, (drivers.proc.returncode, err, drivers.log())
        (line,) = err.strip().splitlines()  # one line, no traceback
        assert line.startswith(f"error: ray.address {cluster.address}: the Ray cluster went away mid-run"), err
        drivers.start("--address", cluster.address)
        _, err = drivers.proc.communicate(timeout=300)
        assert drivers.proc.returncode == 0, (err, drivers.log())
    finally:
        cluster.stop()
    took = time.monotonic() - begun

    done = drivers.trials()
    complete = [t for t in done if t.state == TrialState.COMPLETE]
    failed = [t for t in done if t.state == TrialState.FAIL]
    orphans = [pid for s in drivers.sessions for pid in session_processes(s)]
    print(
        f"ray: {len(faults)} faults ({', '.join(faults)}), {len(done)} trials, {len(failed)} cut, lost: 0, RUNNING: 0, "
        f"orphans: {len(orphans)}, {drivers.runs} runs, {took:.0f} s"
    )
    assert len(complete) == RAY_BUDGET  # the budget is exact
    assert not [t for t in done if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert all(str(t.user_attrs.get("reason", "")).startswith(RAY_CUT) for t in failed), [t.user_attrs for t in failed]
    retried = {t.user_attrs.get("retry_of") for t in done}
    assert all(t.number in retried for t in failed if t.params)  # every cut config was queued again
    completed_configs = [t.params["lr"] for t in complete]
    assert len(set(completed_configs)) == RAY_BUDGET  # no config ran to completion twice
    for t in failed:  # every cut config ran to completion exactly once more
        if t.params:
            assert completed_configs.count(t.params["lr"]) == 1, t.number
    assert not orphans, f"processes of the drivers' local Rays outlived the study: {orphans}"
    assert len(drivers.sessions) == 2 and len(failed) >= 3
