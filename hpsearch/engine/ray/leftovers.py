"""What a killed driver leaves of the local Ray it started, and ending it on the next run.

A local Ray's head processes (gcs_server, raylet, ...) die with a driver killed by SIGKILL, but
the raylet's agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) outlive it under pid 1,
and they ignore SIGTERM. So a driver that starts a local Ray writes down every process under
it (pid and start time: ``liveness.identity``) in ``<output>/<study>/ray-local/<host>-<pid>.json``,
again as trials start (the raylet starts workers on demand), and removes the file once its Ray
is shut down. The next ``run`` of the study on this machine reads the files of drivers that are
gone, SIGKILLs the processes that are still the ones written down (same pid, same start time:
never a process that got the pid later), and says so in one line. A cluster the user started
(``ray start``, ``ray.address``) is never written down, so never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpsearch.study.liveness import identity, local_verdict

FOLDER = "ray-local"  # in <output>/<study>/: one file per driver running a local Ray


def children_of(pid: int) -> list[int]:
    """Every process under ``pid`` (children, their children, ...), read from /proc; [] where there is no /proc."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):  # a process that ended while we read
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        above = todo.pop()
        kids = [child for child, ppid in parent.items() if ppid == above]
        found += kids
        todo += kids
    return sorted(found)


class LocalRay:
    """The record of the local Ray this driver started: who the driver is, and every process under it seen so far."""

    def __init__(self, study_dir: Path):
        self.driver = identity()
        name = re.sub(r"[^\w.-]", "_", f"{self.driver['host']}-{self.driver['pid']}")
        self.path = study_dir / FOLDER / f"{name}.json"
        self.processes: dict[int, dict[str, Any]] = {}

    def note(self) -> None:
        """Write down the processes under this driver now (a no-op when none is new)."""
        new = {pid: identity(pid) for pid in children_of(os.getpid()) if pid not in self.processes}
        if not new:
            return
        self.processes.update(new)
        with contextlib.suppress(OSError):  # no record costs a leftover process at worst, never the run
            self.path.parent.mkdir(parents=True, exist_ok=True)
            part = self.path.with_suffix(".part")
            part.write_text(json.dumps({"driver": self.driver, "processes": list(self.processes.values())}))
            part.replace(self.path)  # the next run never reads half a file

    def forget(self) -> None:
        """Its Ray is shut down: nothing is left to end."""
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)


def end_leftovers(study_dir: Path, say: Callable[[str], None]) -> list[int]:
    """SIGKILL what is left of the local Ray of each dead driver of this study on this machine; the pids ended."""
    ended: list[int] = []
    for path in sorted((study_dir / FOLDER).glob("*.json")):
        try:
            record = json.loads(path.read_text())
            driver, processes = record["driver"], list(record["processes"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written (the .part file is renamed in one step) or not ours: leave it
        if local_verdict(driver) is not False:
            continue  # the driver still runs, or ran on another machine: its Ray is not ours to end
        pids = [p["pid"] for p in processes if isinstance(p, dict) and local_verdict(p) is True]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # Ray's agents ignore SIGTERM
        with contextlib.suppress(OSError):
            path.unlink()
        if pids:
            say(
                f"ray: ended {len(pids)} process{'es' if len(pids) > 1 else ''} left by the local Ray of a killed run "
                f"(driver pid {driver['pid']}): pid{'s' if len(pids) > 1 else ''} {', '.join(map(str, pids))}"
            )
        ended += pids
    return ended
