"""A full disk under the study (a 3 MB tmpfs, nearly filled): a run with slots stops with one
line from the parent, no slot traceback; the next run, once space is free, fails what the full
disk left RUNNING at once and retries it first. Needs root to mount: skipped cleanly otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import TOY, cli


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


@pytest.mark.slow
def test_a_full_disk_is_one_line_from_the_parent_and_no_trial_stays_running_after_the_next_run(small_disk, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"study: full\nobjective: {TOY}:objective\noutput: {small_disk / 'runs'}\nbudget: {{trials: 400}}\n"
        "sampler: random\npruner: none\nfixed: {epochs: 3}\nspace: {lr: {float: [1.0e-4, 1.0], log: true}}\n"
    )
    filler = small_disk / "filler"
    free = shutil.disk_usage(small_disk).free
    filler.write_bytes(b"\0" * (free - 700 * 1024))  # room for a few trials, then none
    result = cli("run", str(spec), "--quiet", "--workers", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr and "[slot" not in result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("stopped early: the disk is full")

    filler.unlink()
    storage = f"sqlite:///{small_disk / 'runs' / 'full' / 'study.db'}"
    before = optuna.load_study(study_name="full", storage=storage).get_trials()
    done = sum(t.state == TrialState.COMPLETE for t in before)
    again = cli("run", str(spec), "--quiet", "--trials", str(done + 2))
    assert again.returncode == 0, again.stderr
    after = optuna.load_study(study_name="full", storage=storage).get_trials()
    assert not [t for t in after if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    for stuck in (t for t in before if t.state == TrialState.RUNNING):  # what the full disk could not end
        assert after[stuck.number].user_attrs["reason"].startswith("failed: process died")
        assert any(t.user_attrs.get("retry_of") == stuck.number and t.state == TrialState.COMPLETE for t in after)
    assert os.path.exists(small_disk / "runs" / "full" / "study.db")
