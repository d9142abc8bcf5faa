"""Shared test helpers: write a spec, run the CLI in a subprocess like a user would, a real PostgreSQL server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from glob import glob
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "fixtures" / "toy.py"


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``hpsearch ARGS`` in a fresh interpreter, as a user runs it."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "hpsearch.cli", *args],
        cwd=cwd or ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def write_spec(tmp_path: Path):
    """Write YAML text (dedented) to tmp_path/name; ``{out}`` and ``{toy}`` are filled in."""

    def write(text: str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).format(out=tmp_path / "runs", toy=TOY))
        return path

    return write


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server: $HPSEARCH_TEST_POSTGRES_URL (.ci/start-services.sh), or a throw-away one
    started with initdb/pg_ctl from Debian's postgresql package and removed after the session."""
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
    subprocess.run(
        [*as_postgres, str(pg / "initdb"), "-D", str(home / "db"), "-U", "postgres", "--auth=trust", "--no-sync"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off"  # throw-away: no fsync
    subprocess.run([*ctl, "-l", str(home / "log"), "-w", "-o", options, "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*ctl, "-m", "immediate", "-W", "stop"], capture_output=True, check=False)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """A PostgreSQL server of this session's own, which tests stop and restart (tests/pgserver.py)."""
    from tests.pgserver import PgServer

    try:
        server = PgServer(free_port())
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    server.create()
    try:
        yield server
    finally:
        server.remove()
