"""Parallel slots: trials per hour with 1 vs 2 trial slots (`hpsearch run SPEC --workers N`).

spaces/quickstart.yaml (digits, resnet8) with no pruning and batch_size 64, accum_steps 1
fixed (so every trial costs about the same whichever configs the sampler picks: the slots
of a run draw different samples), 16 trials of 4 epochs, through the CLI as a user runs it. `fixed.threads` is unset so each slot's thread count applies
(cores // slots: 2 threads for 1 slot, 1 each for 2 slots on 2 cores). Runs alternate
1, 2, 2, 1, ...

OMP_WAIT_POLICY=PASSIVE is set for both variants: on a machine shared with other jobs,
OpenMP threads that spin-wait make the 2-thread single slot 5-10x slower at random
(measured here), which would flatter the 2-slot figure. Medians of 2 interleaved runs each;
steady state: trials per hour from the first trial's start to the last trial's end (what a long
search gets); end to end: trials over the command's wall time, start-up included.

    .venv/bin/python -m bench.parallel_slots               # 16 trials x 4 epochs, 2 repeats
    .venv/bin/python -m bench.parallel_slots --smoke
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, TOY_SETS, hpsearch_cli, interleave, median, parser, ratio, write_result

TRIALS, EPOCHS, REPEATS = 16, 4, 2


def run_cli(workers: int, trials: int, epochs: int, folder: Path, extra: list[str]) -> dict[str, Any]:
    study = f"slots{workers}-{time.monotonic_ns()}"
    sets = [f"fixed.epochs={epochs}", "fixed.threads=null", "pruner.name=none", "budget.timeout=36000", "space.batch_size=64"]
    args = ["run", str(ROOT / "spaces" / "quickstart.yaml"), "--quiet", "--workers", str(workers), "--trials", str(trials)]
    env = {"OMP_WAIT_POLICY": "PASSIVE"}
    _, seconds = hpsearch_cli(*args, "--study", study, "--output", str(folder), sets=[*sets, "space.accum_steps=1", *extra], env=env)
    return {"wall_s": seconds, "trials_per_hour": 3600 * trials / seconds, "steady_trials_per_hour": steady_rate(folder, study)}


def steady_rate(folder: Path, study: str) -> float:
    """Trials per hour from the first trial's start to the last trial's end: the command's start-up left out."""
    import optuna

    loaded = optuna.load_study(study_name=study, storage=f"sqlite:///{folder / study / 'study.db'}")
    done = [(t.datetime_start, t.datetime_complete) for t in loaded.get_trials(deepcopy=False) if t.datetime_start and t.datetime_complete]
    span = (max(end for _, end in done) - min(start for start, _ in done)).total_seconds() if done else 0.0
    return 3600 * len(done) / span if span > 0 else float("nan")


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__).parse_args(argv)
    trials, epochs, repeats, extra = (2, 1, 1, TOY_SETS) if args.smoke else (TRIALS, EPOCHS, REPEATS, [])
    with tempfile.TemporaryDirectory() as tmp:
        variants = {f"{n} slot{'s' if n > 1 else ''}": (lambda r, n=n: run_cli(n, trials, epochs, Path(tmp), extra)) for n in (1, 2)}
        runs = interleave(variants, repeats)
    one, two = (median([m["steady_trials_per_hour"] for m in runs[k]]) for k in ("1 slot", "2 slots"))
    speedup = ratio(two, one)
    e2e = ratio(*(median([m["trials_per_hour"] for m in runs[k]]) for k in ("2 slots", "1 slot")))
    figures = {
        "trials": trials,
        "epochs": epochs,
        "repeats": repeats,
        "cores": os.cpu_count(),
        "trials_per_hour_1_slot": one,
        "trials_per_hour_2_slots": two,
        "speedup": speedup,
        "speedup_end_to_end": e2e,
    }
    rows = [
        [k, *(f"{median([m[key] for m in v]):.0f}" for key in ("wall_s", "trials_per_hour", "steady_trials_per_hour"))]
        for k, v in runs.items()
    ]
    write_result(
        args,
        "parallel_slots",
        "Parallel trial slots (1 vs 2 on 2 cores)",
        headline=f"2 slots: {speedup:.2f}x the trials per hour of 1 slot in steady state ({e2e:.2f}x end to end)",
        goal="≥ 1.6× the trials per hour with 2 slots",
        goal_met=speedup >= 1.6,
        figures=figures,
        table={"columns": ["slots", "wall s", "trials per hour, end to end", "trials per hour, steady state"], "rows": rows},
    )


if __name__ == "__main__":
    main()
