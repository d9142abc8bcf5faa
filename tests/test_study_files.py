"""A study file that is corrupt, truncated or on a read-only mount: every command that reads it
says so in one line, exits 2, prints no traceback and writes nothing beside it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import cli

SPEC = """
    study: s
    objective: "{toy}:objective"
    output: {out}
    budget: {{trials: 3}}
    sampler: {{name: random, seed: 0}}
    pruner: none
    fixed: {{epochs: 2}}
    space:
      lr: {{float: [1.0e-4, 1.0], log: true}}
    """
READERS = [["best"], ["trials"], ["status"], ["export", "-o", "{tmp}/exported.yaml"], ["report"], ["run", "--quiet"]]


@pytest.fixture(scope="module")
def done_study(tmp_path_factory) -> Path:
    """One finished study, copied and damaged by each test."""
    from tests.conftest import TOY

    folder = tmp_path_factory.mktemp("good")
    spec = folder / "spec.yaml"
    spec.write_text(SPEC.replace("{toy}", str(TOY)).replace("{out}", str(folder / "runs")).replace("{{", "{").replace("}}", "}"))
    result = cli("run", str(spec), "--quiet")
    assert result.returncode == 0, result.stderr
    return folder


def damaged(done_study: Path, tmp_path: Path, how: str) -> Path:
    shutil.copytree(done_study, tmp_path / "study", dirs_exist_ok=True)
    spec = tmp_path / "study" / "spec.yaml"
    spec.write_text(spec.read_text().replace(str(done_study), str(tmp_path / "study")))
    db = tmp_path / "study" / "runs" / "s" / "study.db"
    for extra in db.parent.glob("study.db-*"):  # the WAL holds recent pages: damage the file itself
        extra.unlink()
    data = db.read_bytes()
    if how == "corrupt":
        db.write_bytes(b"this is not a database" + data[22:])
    elif how == "truncated":
        db.write_bytes(data[: len(data) // 3])
    return spec


def listing(folder: Path) -> list[str]:
    """Every file, but SQLite's own -wal/-shm, which any reader of a WAL database may create."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.name.endswith(("-wal", "-shm")))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["corrupt", "truncated"])
@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_a_damaged_study_file_is_one_line_for_every_command(done_study, tmp_path, how, command):
    spec = damaged(done_study, tmp_path, how)
    before = listing(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    result = cli(args[0], str(spec), *args[1:])
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: storage"), result.stderr
    assert "study.db" in lines[0] or "database" in lines[0]
    assert listing(tmp_path) == before  # nothing written: no export, no report, no lock file


@pytest.mark.slow
def test_run_on_a_read_only_mount_is_one_line(done_study, tmp_path):
    spec = damaged(done_study, tmp_path, "intact")
    mount = tmp_path / "study" / "runs"
    made = subprocess.run(["mount", "--bind", "-o", "ro", str(mount), str(mount)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {made.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], capture_output=True, check=False)
        spec.write_text(spec.read_text().replace("trials: 3", "trials: 4"))
        result = cli("run", str(spec), "--quiet")
        best = cli("best", str(spec))
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: storage") and "study.db" in line and "read-only file system" in line
    assert best.returncode == 0, best.stderr  # reading needs no write
