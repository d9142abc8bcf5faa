"""Chaos on a real PostgreSQL study (tests/pgserver.py): three workers (two `hpsearch worker`s and
an `hpsearch run --workers 2` with two slot processes) on a study of short sleeping trials, under
a seeded schedule of kill -9s of workers and slots, two database restarts and one SIGTERM. Killed
workers are started again at once, as a job scheduler would. The one heavy test of the suite:
about a minute here, bounded at 3 minutes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from tests.conftest import ROOT, TOY
from tests.pgserver import PASSWORD

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
