"""A throw-away PostgreSQL server this test session may stop and restart (outage and chaos tests),
with a password user, so a test can look for the password in everything a scenario wrote.

Started with initdb/pg_ctl from Debian's postgresql package (as the postgres user when run as
root: the server refuses root); one per session, removed after it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from glob import glob
from pathlib import Path

PASSWORD = "S3cretPw-hpsearch"  # noqa: S105 - a throw-away server's; tests grep for it


class PgServer:
    def __init__(self, port: int):
        bins = sorted(glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
        if not bins:
            raise FileNotFoundError("no PostgreSQL here: run .ci/install-system.sh")
        self.bin = Path(bins[-1])
        self.home = Path(tempfile.mkdtemp(prefix="hpsearch-pgfault-"))
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_postgres:
            shutil.chown(self.home, "postgres")
        self.port = port
        self.url = f"postgresql://u:{PASSWORD}@127.0.0.1:{port}/postgres"

    def _ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1 -c fsync=off"
        cmd = [*self.as_postgres, str(self.bin / "pg_ctl"), "-D", str(self.home / "db"), "-l", str(self.home / "log"), "-o", options]
        subprocess.run([*cmd, *args], check=True, capture_output=True, timeout=120)

    def create(self) -> None:
        initdb = [*self.as_postgres, str(self.bin / "initdb"), "-D", str(self.home / "db"), "-U", "postgres", "--no-sync"]
        subprocess.run([*initdb, "--auth-local=trust", "--auth-host=scram-sha-256"], check=True, capture_output=True, timeout=120)
        self.start()
        psql = [*self.as_postgres, str(self.bin / "psql"), "-h", str(self.home), "-p", str(self.port), "-U", "postgres", "-qtA"]
        sql = f"CREATE ROLE u LOGIN SUPERUSER PASSWORD '{PASSWORD}'"
        subprocess.run([*psql, "-c", sql], check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        self._ctl("-w", "start")

    def stop(self) -> None:
        self._ctl("-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self._ctl("-m", "fast", "-w", "restart")

    def remove(self) -> None:
        subprocess.run(
            [*self.as_postgres, str(self.bin / "pg_ctl"), "-D", str(self.home / "db"), "-m", "immediate", "-W", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.home, ignore_errors=True)
