"""Several `hpsearch worker` processes on one study in a real PostgreSQL server.

Uses $HPSEARCH_TEST_POSTGRES_URL when set (see .ci/start-services.sh); otherwise starts a
throw-away server with initdb/pg_ctl (Debian's postgresql package) and removes it after.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import optuna
from optuna.trial import TrialState

from hpsearch.storage import engine_url
from tests.conftest import ROOT

TOY = ROOT / "tests" / "fixtures" / "toy.py"


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
    # How the 9 were spread over the workers depends on machine load; that they add up does not.
    ran = sum(int(out.split("this worker ran ")[1].split(";")[0]) for out in outputs)
    assert ran == 9
