"""No storage password in anything hpsearch produces: a whole scenario against a real PostgreSQL
server with a password user (tests/pgserver.py): run, a Ctrl-C'd worker and its resume hint,
status, trials, best, export, report; every byte printed and every file under the test's folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import ROOT, TOY, cli
from tests.pgserver import PASSWORD


@pytest.mark.slow
def test_no_password_in_any_output_log_export_or_report(pg_server, tmp_path):
    study = f"secret-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"study: {study}\nobjective: {TOY}:objective\noutput: {tmp_path / 'runs'}\nbudget: {{trials: 4}}\n"
        "sampler: random\npruner: none\nfixed: {epochs: 4, sleep: 0.2}\nspace: {lr: {float: [1.0e-4, 1.0], log: true}}\n"
    )
    url = pg_server.url
    printed: list[str] = []
    worker = subprocess.Popen(
        [sys.executable, "-m", "hpsearch.cli", "worker", str(spec), "--storage", url],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    end = time.monotonic() + 120
    while not any(t.state == TrialState.RUNNING and t.intermediate_values for t in optuna_trials(url, study)):
        assert worker.poll() is None and time.monotonic() < end, worker.communicate()
        time.sleep(0.2)
    worker.send_signal(signal.SIGINT)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 130 and "to resume, run the same command again" in err, err
    printed += [out, err]
    for args in (
        ["run", str(spec), "--storage", url],
        ["status", str(spec), "--storage", url],
        ["trials", str(spec), "--storage", url],
        ["best", str(spec), "--storage", url],
        ["export", str(spec), "--storage", url, "-o", str(tmp_path / "best.yaml")],
        ["report", str(spec), "--storage", url],
        ["worker", str(spec), "--storage", url.replace("127.0.0.1", "127.0.0.1:1", 1).replace(f":{pg_server.port}", "")],
    ):
        result = cli(*args)
        printed += [result.stdout, result.stderr]
        assert result.returncode == (2 if args[0] == "worker" else 0), (args[0], result.stderr)
    assert (tmp_path / "best.yaml").exists() and list((tmp_path / "runs").rglob("*.html"))
    assert "***" in "".join(printed)  # the URL was shown, redacted
    assert not [text for text in printed if PASSWORD in text]
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "spec.yaml" and PASSWORD.encode() in p.read_bytes()]
    assert not leaked


def optuna_trials(url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    try:
        return optuna.load_study(study_name=study, storage=url).get_trials()
    except KeyError:
        return []
