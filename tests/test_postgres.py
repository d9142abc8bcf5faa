"""Several `hpsearch worker` processes on one study in a real PostgreSQL server.

Uses $HPSEARCH_TEST_POSTGRES_URL when set (see .ci/start-services.sh); otherwise starts a
throw-away server with initdb/pg_ctl (Debian's postgresql package) and removes it after.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import ROOT, cli

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TOY = ROOT / "tests" / "fixtures" / "toy.py"


@pytest.mark.slow
def test_three_workers_on_one_study_finish_exactly_the_budget(postgres_url, tmp_path):
    study = f"pg-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "pg.yaml"
    spec.write_text(f"""
study: {study}
objective: {TOY}:objective
output: {tmp_path / "runs"}
budget: {{trials: 9}}
pruner: none
fixed: {{epochs: 2, sleep: 0.2}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
""")
    cmd = [sys.executable, "-m", "hpsearch.cli", "worker", str(spec), "--storage", postgres_url, "--quiet"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    for p, out in zip(procs, outputs, strict=True):
        assert p.returncode == 0, out
        assert f"{study}: 9 finished (0 pruned), 0 failed" in out

    trials = optuna.load_study(study_name=study, storage=postgres_url).get_trials()
    assert sorted(t.number for t in trials) == list(range(9))  # none lost, none twice, no junk beyond the budget
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert len({t.params["lr"] for t in trials}) == 9
    # How the 9 were spread over the workers depends on machine load; that they add up does not.
    ran = sum(int(out.split("this worker ran ")[1].split(";")[0]) for out in outputs)
    assert ran == 9


@pytest.mark.slow
def test_the_printed_url_opens_unchanged_in_optuna_and_optuna_dashboard(postgres_url, tmp_path):
    """psycopg 3 is the driver SQLAlchemy 2 picks for postgresql://, so the URL hpsearch prints is the URL every tool takes."""
    import json
    import time
    import urllib.request

    from tests.conftest import free_port

    study = f"url-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "url.yaml"
    spec.write_text(
        f"study: {study}\nobjective: {TOY}:objective\noutput: {tmp_path / 'runs'}\nbudget: {{trials: 2}}\n"
        "pruner: none\nfixed: {epochs: 1}\nspace: {lr: {float: [1.0e-4, 1.0], log: true}}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "hpsearch.cli", "run", str(spec), "--storage", postgres_url, "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    printed = run.stdout.rsplit("\nstorage ", 1)[1].split(";")[0].strip()  # the closing "storage URL; TensorBoard: ..." line
    assert printed == postgres_url  # no driver rewritten into it (this URL has no password to redact)

    assert len(optuna.load_study(study_name=study, storage=printed).get_trials()) == 2  # plain Optuna, the URL as printed

    port = free_port()
    dashboard = subprocess.Popen(
        [str(Path(sys.executable).parent / "optuna-dashboard"), printed, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as response:
                    studies = json.load(response)["study_summaries"]
                break
            except OSError:
                if dashboard.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(dashboard.communicate()[0]) from None
                time.sleep(0.5)
        assert study in {s["study_name"] for s in studies}
    finally:
        dashboard.terminate()
        dashboard.wait(timeout=30)


@pytest.mark.slow
def test_reading_a_study_from_an_empty_database_is_one_line(postgres_url, tmp_path):
    """A database no study has been run in (no Optuna tables yet): status, best and trials say so in one line."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("DROP DATABASE IF EXISTS hpsearch_empty")
        db.execute("CREATE DATABASE hpsearch_empty")
    empty = postgres_url.rsplit("/", 1)[0] + "/hpsearch_empty"
    spec = tmp_path / "nothing.yaml"
    spec.write_text(f"study: nothing\nobjective: {TOY}:train\nstorage: {empty}\nspace:\n  lr: {{float: [0.01, 0.1]}}\n")
    for command in ("status", "best", "trials"):
        result = cli(command, str(spec))
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, (command, result.stderr)
        assert "hpsearch_empty: no study has been run in this database yet" in result.stderr, (command, result.stderr)


OPEN_WHEN_TOLD = """
import sys, time
from pathlib import Path
from hpsearch.study.storage import open_storage
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.002)
open_storage(sys.argv[1]).engine.dispose()
"""


@pytest.mark.slow
def test_processes_opening_a_fresh_database_together_all_get_the_storage(postgres_url, tmp_path):
    """Each round: a new database, 6 processes open it at the same moment (the race three workers
    started together lost in a CI run: "relation studies already exists")."""
    import psycopg

    for round_ in range(3):
        name = f"hpsearch_race_{round_}"
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute(f"DROP DATABASE IF EXISTS {name}")
            db.execute(f"CREATE DATABASE {name}")
        url, go = postgres_url.rsplit("/", 1)[0] + f"/{name}", tmp_path / f"go-{round_}"
        procs = [
            subprocess.Popen([sys.executable, "-c", OPEN_WHEN_TOLD, url, str(go)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
            for _ in range(6)
        ]
        time.sleep(3)  # all have imported hpsearch and wait for the file (a slow one only joins later)
        go.touch()
        results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
        assert all(code == 0 for code, _ in results), [err.strip().splitlines()[-1:] for code, err in results if code]


def test_dead_trials_buried_by_two_processes_while_a_third_asks_get_one_retry_each(postgres_url):
    """A dead trial's end and its retry are one transaction that locks the study row, as Optuna's own
    trial creation does: two buriers and an asker on one PostgreSQL study neither deadlock nor queue
    a config twice, and trial numbers stay unique."""
    import threading

    from hpsearch.study.liveness import Dead, bury
    from hpsearch.study.storage import open_storage

    name = f"bury-{uuid.uuid4().hex[:8]}"
    study = optuna.create_study(storage=open_storage(postgres_url), study_name=name)
    dead = [study.ask({"x": optuna.distributions.FloatDistribution(0, 1)}).number for _ in range(12)]
    studies = [optuna.load_study(study_name=name, storage=open_storage(postgres_url)) for _ in range(3)]
    ended: list[list[int]] = [[], []]

    def bury_all(i: int) -> None:
        for t in studies[i].get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            ended[i] += [d.trial.number for d in bury(studies[i], [Dead(t, f"failed: seen by {i}")])]

    threads = [threading.Thread(target=bury_all, args=(i,)) for i in range(2)]
    threads.append(threading.Thread(target=lambda: [studies[2].ask() for _ in range(12)]))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    trials = study.get_trials()
    assert sorted(ended[0] + ended[1]) == dead  # each dead trial ended by exactly one of them
    assert sorted(t.user_attrs["retry_of"] for t in trials if "retry_of" in t.user_attrs) == dead  # an ask takes a retry first
    assert [t.number for t in trials] == list(range(len(trials)))
    states = [t.state for t in trials]
    assert states.count(TrialState.FAIL) == 12 and states.count(TrialState.RUNNING) == 12  # the 12 asked
