"""Shared test helpers: write a spec, run the CLI in a subprocess like a user would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "fixtures" / "toy.py"


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``hpsearch ARGS`` in a fresh interpreter, as a user runs it."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "hpsearch.cli", *args],
        cwd=cwd or ROOT, env=full_env, capture_output=True, text=True, timeout=timeout,
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
