"""Several `hpsearch worker` processes on one study in a real PostgreSQL server.

Uses $HPSEARCH_TEST_POSTGRES_URL when set (see .ci/start-services.sh); otherwise starts a
throw-away server with initdb/pg_ctl (Debian's postgresql package) and removes it after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from glob import glob
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from hpsearch.storage import engine_url
from tests.conftest import ROOT, free_port

TOY = ROOT / "tests" / "fixtures" / "toy.py"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    url = os.environ.get("HPSEARCH_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    bins = sorted(glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    if not bins:
        pytest.skip("no PostgreSQL here: run .ci/install-system.sh, or set HPSEARCH_TEST_POSTGRES_URL")
    pg = Path(bins[-1])
    home = Path(tempfile.mkdtemp(prefix="hpsearch-pg-"))
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []  # the server refuses to run as root
    if as_postgres:
        shutil.chown(home, "postgres")
    port = free_port()
    ctl = [*as_postgres, str(pg / "pg_ctl"), "-D", str(home / "db")]
    subprocess.run([*as_postgres, str(pg / "initdb"), "-D", str(home / "db"), "-U", "postgres", "--auth=trust", "--no-sync"],
                   check=True, capture_output=True)
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off"  # throw-away: no fsync
    subprocess.run([*ctl, "-l", str(home / "log"), "-w", "-o", options, "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*ctl, "-m", "immediate", "-W", "stop"], capture_output=True, check=False)
        shutil.rmtree(home, ignore_errors=True)


def test_three_workers_on_one_study_finish_exactly_the_budget(postgres_url, tmp_path):
    study = f"pg-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "pg.yaml"
    spec.write_text(f"""
study: {study}
objective: {TOY}:objective
output: {tmp_path / 'runs'}
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
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out
        assert f"{study}: 9 finished (0 pruned), 0 failed" in out

    trials = optuna.load_study(study_name=study, storage=engine_url(postgres_url)).get_trials()
    assert sorted(t.number for t in trials) == list(range(9))  # none lost, none twice, no junk beyond the budget
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert len({t.params["lr"] for t in trials}) == 9
    by_worker = {t.user_attrs["worker"] for t in trials}
    assert len(by_worker) >= 2, "only one worker ever got a trial"
    ran = sum(int(out.split("this worker ran ")[1].split(";")[0]) for out in outputs)
    assert ran == 9
