"""Busy machine: `hpsearch run spaces/quickstart.yaml --trials 8` beside two busy processes vs alone.

Two `python -c 'while 1: pass'` loops stand for other jobs on the machine (on 2 cores: as many
busy processes as cores). The search runs as a user runs it, through the CLI with the spec's
own settings and the environment this script was started with: hpsearch itself sets
OMP_WAIT_POLICY=PASSIVE and gives each slot its share of the cores. Runs alternate quiet,
busy, busy, quiet, ... (2 repeats); the figure is the ratio of the median wall times. The busy
loops start just before a busy run and are stopped (by pid) right after it; the load average
beside each run is the machine's before it: other jobs shared it too.

    .venv/bin/python -m bench.busy_machine                              # 8 trials, 2 repeats
    .venv/bin/python -m bench.busy_machine --wait-policy ACTIVE         # what spinning OpenMP threads cost
    .venv/bin/python -m bench.busy_machine --smoke
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import ROOT, TOY_SETS, hpsearch_cli, interleave, load_average, median, parser, ratio, write_result

GOAL = 3.0  # busy wall time at most this many times the quiet wall time
BUSY = 2  # busy-looping processes beside the busy runs


@contextlib.contextmanager
def busy_loops(n: int) -> Iterator[list[int]]:
    """n processes that never sleep; stopped by pid however the block ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
            p.wait()


def run_cli(busy: int, trials: int, folder: Path, extra: list[str], wait_policy: str | None) -> dict[str, Any]:
    args = ["run", str(ROOT / "spaces" / "quickstart.yaml"), "--quiet", "--trials", str(trials), "--output", str(folder)]
    args += ["--study", f"busy{busy}-{time.monotonic_ns()}"]
    load = load_average()
    with busy_loops(busy):
        _, seconds = hpsearch_cli(*args, sets=["budget.timeout=36000", *extra], env={"OMP_WAIT_POLICY": wait_policy} if wait_policy else {})
    return {"wall_s": seconds, "load_1min_before": load[0] if load else None}


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--wait-policy", help="set OMP_WAIT_POLICY for hpsearch (default: leave it to hpsearch, which picks PASSIVE)")
    args = p.parse_args(argv)
    trials, repeats, extra = (2, 1, TOY_SETS) if args.smoke else (8, 2, [])
    quiet, busy = "quiet", f"{BUSY} busy processes"
    with tempfile.TemporaryDirectory() as tmp:
        variants = {name: (lambda r, n=n: run_cli(n, trials, Path(tmp), extra, args.wait_policy)) for name, n in ((quiet, 0), (busy, BUSY))}
        runs = interleave(variants, repeats)
    quiet_s, busy_s = (median([m["wall_s"] for m in runs[k]]) for k in (quiet, busy))
    slowdown = ratio(busy_s, quiet_s)
    cores = len(os.sched_getaffinity(0))
    figures = {
        "trials": trials,
        "repeats": repeats,
        "busy_processes": BUSY,
        "cores": cores,
        "omp_wait_policy": args.wait_policy or "PASSIVE (hpsearch's default)",
        "quiet_s": quiet_s,
        "busy_s": busy_s,
        "slowdown": slowdown,
    }
    write_result(
        args,
        "busy_machine",
        f"Busy machine ({BUSY} busy processes on {cores} cores)",
        headline=f"beside {BUSY} busy processes the quickstart takes {slowdown:.2f}x its quiet wall time ({busy_s:.0f} s vs {quiet_s:.0f} s)",
        goal=f"≤ {GOAL:g}× the quiet wall time beside {BUSY} busy processes",
        goal_met=slowdown <= GOAL,
        figures=figures,
        table={
            "columns": ["variant", "repeat", "wall s", "load average before"],
            "rows": [[k, i + 1, f"{m['wall_s']:.0f}", m["load_1min_before"]] for k, v in runs.items() for i, m in enumerate(v)],
        },
    )


if __name__ == "__main__":
    main()
