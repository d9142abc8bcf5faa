"""Ray for tests: a ``ray start --head`` cluster that a test may stop and start again, and the processes
of a Ray session, found by the files they hold open in its session folder (``/tmp/ray/session_*``).

Stopping ends this cluster's processes only: ``ray stop`` would end every Ray on the machine,
another test's or another user's too."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
SESSION = re.compile(r"ray: the objective's printed output is in (/\S+?)/logs/")  # the driver's first line (engine/ray/cluster.py)


def alive(pid: int) -> bool:
    """Runs, and is not a zombie (where pid 1 does not reap, a killed orphan stays one)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def session_processes(session: str, ray_only: bool = False) -> list[int]:
    """Live processes that hold a file of the Ray session open (its logs, its sockets): every process of
    that Ray, whenever it started (agents, workers, the head's daemons). ``ray_only``: not its drivers
    (an ``hpsearch run`` joined to a cluster logs there too)."""
    found = []
    for fds in Path("/proc").glob("[0-9]*/fd"):
        pid = int(fds.parent.name)
        with contextlib.suppress(OSError):  # it ended while we looked, or is not ours to read
            if pid == os.getpid() or not any(os.readlink(fd).startswith(session + "/") for fd in fds.iterdir()):
                continue
            if alive(pid) and not (ray_only and is_driver(pid)):
                found.append(pid)
    return sorted(found)


def is_driver(pid: int) -> bool:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return b"hpsearch.cli" in argv or b"pytest" in b" ".join(argv)


def sessions_in(output: str) -> list[str]:
    """The session folders of the local Rays that drivers started, from their printed first lines."""
    return SESSION.findall(output)


def end_session(session: str, timeout: float = 60, ray_only: bool = False) -> list[int]:
    """SIGKILL what is left of a session (a test that failed half-way); the pids that were left."""
    left = session_processes(session, ray_only)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + timeout
    while session_processes(session, ray_only) and time.monotonic() < end:
        time.sleep(0.2)
    return left


class RayCluster:
    """``ray start --head`` on ``port`` with 2 CPUs (``extra``: more flags), as a user starts a cluster."""

    def __init__(self, port: int, *extra: str):
        self.port, self.extra = port, extra
        self.head = 0  # gcs_server's pid
        self.session = ""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [str(RAY), "start", "--head", f"--port={self.port}", "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"]
        # a session of its own: the head's daemons share its process group, and no other process does (``stop``)
        subprocess.run([*args, *self.extra], check=True, capture_output=True, env=ENV, timeout=180, start_new_session=True)
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                argv = cmdline.read_bytes().decode(errors="replace").split("\0")
                if argv[0].endswith("gcs_server") and f"--gcs_server_port={self.port}" in argv:
                    self.head = int(cmdline.parent.name)
                    self.session = next(a.split("=", 1)[1] for a in argv if a.startswith("--session-dir="))
        assert self.head, f"no gcs_server on port {self.port} after ray start"

    def up(self) -> bool:
        return alive(self.head)

    def stop(self) -> None:
        """Kill -9 the head and everything of its session, as ``ray stop --force`` does, and wait until they are gone."""
        with contextlib.suppress(ProcessLookupError):
            group = os.getpgid(self.head)
            assert group != os.getpgid(0), "the cluster shares this test's process group"
            os.killpg(group, signal.SIGKILL)
        left = end_session(self.session, ray_only=True)  # workers have groups of their own
        assert not session_processes(self.session, ray_only=True), f"Ray processes of {self.session} still run: {left}"

    def restart(self) -> None:
        self.stop()
        self.start()
