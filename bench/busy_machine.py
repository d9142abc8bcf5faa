"""Busy machine: `hpsearch run spaces/quickstart.yaml --trials 8` beside two busy processes vs alone.

Two `python -c 'while 1: pass'` loops stand for other jobs on the machine (on 2 cores: as many
busy processes as cores). The search runs as a user runs it, through the CLI with the spec's
own settings and the environment this script was started with: hpsearch itself sets
OMP_WAIT_POLICY=PASSIVE and gives each slot its share of the cores. Runs alternate quiet,
busy, busy, quiet, ...; the figure is the ratio of the median wall times. The busy loops
start just before a busy run and are stopped (by pid) right after it.

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

from bench.common import ROOT, TOY, hpsearch_cli, interleave, load_average, median, parser, ratio, write_result

GOAL = 3.0  # busy wall time at most this many times the quiet wall time


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
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--busy", type=int, default=2, help="busy-looping processes beside the busy runs (default 2)")
    p.add_argument("--wait-policy", help="set OMP_WAIT_POLICY for hpsearch (default: leave it to hpsearch, which picks PASSIVE)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="a spec override for both variants")
    args = p.parse_args(argv)
    started = time.perf_counter()
    extra: list[str] = list(args.sets)
    if args.smoke:
        args.trials, args.repeats = 2, 1
        extra += [f"objective={TOY}:objective", "metric=val_acc", "direction=maximize"]  # no torch: checks the plumbing, in seconds
    quiet, busy = "quiet", f"{args.busy} busy processes"
    with tempfile.TemporaryDirectory() as tmp:
        runs = interleave(
            {
                quiet: lambda r: run_cli(0, args.trials, Path(tmp), extra, args.wait_policy),
                busy: lambda r: run_cli(args.busy, args.trials, Path(tmp), extra, args.wait_policy),
            },
            args.repeats,
        )
    quiet_s, busy_s = (median([m["wall_s"] for m in runs[k]]) for k in (quiet, busy))
    slowdown = ratio(busy_s, quiet_s)
    cores = len(os.sched_getaffinity(0))
    figures = {
        "trials": args.trials,
        "repeats": args.repeats,
        "busy_processes": args.busy,
        "cores": cores,
        "omp_wait_policy": args.wait_policy or "PASSIVE (hpsearch's default)",
        "overrides": args.sets,
        "quiet_s": quiet_s,
        "busy_s": busy_s,
        "slowdown": slowdown,
    }
    rows = [[k, i + 1, f"{m['wall_s']:.0f}", m["load_1min_before"]] for k, v in runs.items() for i, m in enumerate(v)]
    notes = [
        (
            f"Medians of {args.repeats} interleaved runs of `hpsearch run spaces/quickstart.yaml --trials {args.trials}` (the spec's "
            f"own settings: one slot with {cores} threads on {cores} cores, median pruning), alone and beside {args.busy} "
            "`python -c 'while 1: pass'` processes. The load average is the machine's before each run: other jobs shared it too."
        ),
    ]
    write_result(
        args.out,
        "busy_machine",
        f"Busy machine ({args.busy} busy processes on {cores} cores)",
        headline=f"beside {args.busy} busy processes the quickstart takes {slowdown:.2f}x its quiet wall time "
        f"({busy_s:.0f} s vs {quiet_s:.0f} s)",
        smoke=args.smoke,
        goal=f"≤ {GOAL:g}× the quiet wall time beside {args.busy} busy processes",
        goal_met=slowdown <= GOAL if not args.smoke else None,
        figures=figures,
        table={"columns": ["variant", "repeat", "wall s", "load average before"], "rows": rows},
        notes=notes,
        started=started,
    )


if __name__ == "__main__":
    main()
