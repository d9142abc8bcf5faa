"""Parallel slots: trials per hour with 1 vs 2 trial slots (`hpsearch run SPEC --workers N`).

spaces/quickstart.yaml (digits, resnet8) with no pruning (so every trial costs the same
epochs whatever the order), --trials trials of --epochs epochs, through the CLI as a user
runs it, start-up included. `fixed.threads` is unset so each slot's thread count applies
(cores // slots: 2 threads for 1 slot, 1 each for 2 slots on 2 cores). Runs alternate
1, 2, 2, 1, ...

OMP_WAIT_POLICY=PASSIVE is set for both variants: on a machine shared with other jobs,
OpenMP threads that spin-wait make the 2-thread single slot 5-10x slower at random
(measured here), which would flatter the 2-slot figure; `--omp-default` turns this off.

    .venv/bin/python bench/parallel_slots.py               # 16 trials x 3 epochs, 2 repeats
    .venv/bin/python bench/parallel_slots.py --smoke
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, TOY, Timer, interleave, median, parser, ratio, write_result


def run_cli(workers: int, trials: int, epochs: int, folder: Path, extra: list[str], omp_passive: bool) -> dict[str, Any]:
    study = f"slots{workers}-{time.monotonic_ns()}"
    sets = [f"fixed.epochs={epochs}", "fixed.threads=null", "pruner.name=none", "budget.timeout=36000", *extra]
    cmd = [sys.executable, "-m", "hpsearch.cli", "run", str(ROOT / "spaces" / "quickstart.yaml"), "--quiet",
           "--workers", str(workers), "--trials", str(trials), "--study", study, "--output", str(folder)]
    cmd += [arg for s in sets for arg in ("--set", s)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if omp_passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    with Timer() as t:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return {"wall_s": t.s, "trials_per_hour": 3600 * trials / t.s}


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--omp-default", action="store_true", help="leave OMP_WAIT_POLICY unset")
    args = p.parse_args(argv)
    started = time.perf_counter()
    extra: list[str] = []
    if args.smoke:
        args.trials, args.epochs, args.repeats = 1, 1, 1
        extra = [f"objective={TOY}:objective"]  # no torch: the smoke run checks the plumbing, in seconds
    with tempfile.TemporaryDirectory() as tmp:
        runs = interleave(
            {f"{n} slot{'s' if n > 1 else ''}": (lambda r, n=n: run_cli(n, args.trials, args.epochs, Path(tmp), extra, not args.omp_default))
             for n in (1, 2)},
            args.repeats,
        )
    one, two = (median([m["trials_per_hour"] for m in runs[k]]) for k in ("1 slot", "2 slots"))
    speedup = ratio(two, one)
    figures = {"trials": args.trials, "epochs": args.epochs, "repeats": args.repeats, "cores": os.cpu_count(),
               "omp_wait_policy": None if args.omp_default else "PASSIVE",
               "trials_per_hour_1_slot": one, "trials_per_hour_2_slots": two, "speedup": speedup}
    rows = [[k, f"{median([m['wall_s'] for m in v]):.0f}", f"{median([m['trials_per_hour'] for m in v]):.0f}"] for k, v in runs.items()]
    notes = [
        f"2 slots / 1 slot: {speedup:.2f}x trials per hour (medians of {args.repeats} interleaved runs of {args.trials} trials x "
        f"{args.epochs} epochs, CLI start-up included).",
    ]
    write_result(
        args.out, "parallel_slots", "Parallel trial slots (1 vs 2 on 2 cores)",
        headline=f"2 slots: {speedup:.2f}x the trials per hour of 1 slot", smoke=args.smoke,
        goal="≥ 1.6× the trials per hour with 2 slots", goal_met=speedup >= 1.6 if not args.smoke else None,
        figures=figures, table={"columns": ["slots", "wall s", "trials per hour"], "rows": rows}, notes=notes, started=started,
    )


if __name__ == "__main__":
    main()
