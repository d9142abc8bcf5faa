"""Growth: seconds of overhead per trial when a study holds ~100 and ~1,000 trials, and where it goes.

One study of `--trials` trivial trials (tests/fixtures/toy.py, 3 epochs, TPE + median
pruner, default SQLite storage) runs in-process; the trial loop's step hook
(`work(steps=...)`) splits each trial's wall time into: claim (lock, liveness check, count,
study.ask), sampler (Optuna TPE through Space.suggest, then the config, identity and first
beat in one commit), pruner (trial.report + should_prune), reporter (TensorBoard events,
history), trial attributes (the outcome's, one commit, and the HParams summary), tell (and the
heartbeat thread's end), progress (counts and best so far, read from storage) and the rest. A
hand-written Optuna script on the same space, sampler and pruner runs the same number of trials
for comparison, each run in a fresh interpreter. Per window of 50 trials: the median gap between
consecutive trial ends, and the split as mean ms per trial.

    .venv/bin/python -m bench.growth                       # 1000 trials, windows at 100 and 950
    .venv/bin/python -m bench.growth --smoke
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import Timer, interleave, median, parser, ratio, write_result
from bench.orchestration import in_child, run_optuna, write_spec

CATEGORIES = ("claim", "sampler", "pruner", "reporter", "trial_attrs", "tell", "progress", "other")


class Clock:
    """The trial loop's step hook (hpsearch.engine.optuna.work(steps=...)): seconds per step, per trial."""

    def __init__(self) -> None:
        self.raw: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.ends: dict[int, float] = {}

    def __call__(self, step: str, number: int, seconds: float) -> None:
        self.raw[number][step] += seconds
        if step == "trial":
            self.ends[number] = time.perf_counter()

    def split(self, number: int) -> dict[str, float]:
        r = self.raw[number]
        parts = {"claim": r["claim"], "sampler": r["suggest"], "pruner": r["prune"], "trial_attrs": r["record"], "tell": r["tell"]}
        parts |= {"reporter": r["objective"] - r["prune"], "progress": r["refresh"]}  # the toy objective itself takes microseconds
        parts["other"] = r["trial"] - sum(parts.values())
        return parts


def run_hpsearch(trials: int) -> dict[str, Any]:
    from hpsearch.engine.optuna import work
    from hpsearch.spec.loader import load_spec

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        spec = load_spec(write_spec(Path(tmp), trials, sampler="auto"))  # the default: what a user's spec gets
        with Timer() as t:
            work(spec, quiet=True, steps=clock)
    ends = sorted(clock.ends)
    intervals = {n: clock.ends[n] - clock.ends[p] for p, n in itertools.pairwise(ends)}
    return {"wall_s": t.s, "intervals": intervals, "split": {n: clock.split(n) for n in intervals}}


def run_optuna_timed(trials: int) -> dict[str, Any]:
    """bench.orchestration's Optuna script with a timestamp at the end of every trial."""
    stamps: dict[int, float] = {}
    m = run_optuna(trials, callbacks=[lambda study, trial: stamps.__setitem__(trial.number, time.perf_counter())])
    return m | {"intervals": {n: stamps[n] - stamps[p] for p, n in itertools.pairwise(sorted(stamps))}}


def child(variant: str, trials: int) -> dict[str, Any]:
    import optuna  # noqa: F401 (imported before the timer starts)

    import hpsearch.engine.optuna  # noqa: F401

    return run_hpsearch(trials) if variant == "hpsearch" else run_optuna_timed(trials)


def from_child(variant: str, trials: int) -> dict[str, Any]:
    """A fresh interpreter per run (hpsearch's SQLite settings are process-wide); JSON keys back to trial numbers."""
    m = in_child("bench.growth", variant, trials)
    return m | {k: {int(n): v for n, v in m[k].items()} for k in ("intervals", "split") if k in m}


def window_ms(intervals: dict[int, float], lo: int, hi: int) -> float:
    """Median seconds between consecutive trial ends for trials lo..hi-1, in ms."""
    return 1000 * median([v for n, v in intervals.items() if lo <= n < hi])


def window_split(split: dict[int, dict[str, float]], lo: int, hi: int) -> dict[str, float]:
    """Mean ms per trial per category over trials lo..hi-1."""
    numbers = [n for n in split if lo <= n < hi]
    return {c: 1000 * sum(split[n][c] for n in numbers) / max(1, len(numbers)) for c in CATEGORIES}


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--child", choices=["hpsearch", "optuna"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.trials)))
        return
    window = 4 if args.smoke else 50  # trials per measuring window
    args.trials = 12 if args.smoke else args.trials
    small, large = (args.trials // 10, args.trials - window)  # the windows start at ~10% and at the end
    windows = {f"{small}": (small, small + window), f"{large}": (large, args.trials)}
    runs = interleave({name: (lambda r, name=name: from_child(name, args.trials)) for name in ("hpsearch", "optuna")}, 1)

    figures: dict[str, Any] = {"trials": args.trials, "window": window}
    rows = []
    for label, (lo, hi) in windows.items():
        hp = median([window_ms(m["intervals"], lo, hi) for m in runs["hpsearch"]])
        op = median([window_ms(m["intervals"], lo, hi) for m in runs["optuna"]])
        split = {c: median([window_split(m["split"], lo, hi)[c] for m in runs["hpsearch"]]) for c in CATEGORIES}
        at = {"hpsearch_ms_per_trial": hp, "optuna_ms_per_trial": op, "hpsearch_over_optuna": ratio(hp, op)}
        figures[f"at_{label}"] = at | {"split_ms": split}
        rows.append([f"trials {lo}-{hi - 1}", f"{hp:.1f}", f"{op:.1f}", f"{ratio(hp, op):.2f}", *(f"{split[c]:.1f}" for c in CATEGORIES)])
    a, b = (figures[f"at_{k}"]["hpsearch_ms_per_trial"] for k in windows)
    figures["growth_ratio"] = ratio(b, a)
    last = figures[f"at_{large}"]["split_ms"]
    ops = [figures[f"at_{k}"]["optuna_ms_per_trial"] for k in windows]
    headline = (
        f"{a:.0f} ms per trial at ~{small} trials, {b:.0f} ms at ~{large} "
        f"(Optuna script: {ops[0]:.0f} and {ops[1]:.0f} ms); sampler {last['sampler']:.0f} ms of it at ~{large}"
    )
    write_result(
        args,
        "growth",
        "Growth: overhead per trial at ~100 and ~1,000 trials",
        headline=headline,
        goal="(no target) report the overhead per trial and where it goes",
        figures=figures,
        table={"columns": ["window", "hpsearch ms/trial", "Optuna script ms/trial", "ratio", *CATEGORIES], "rows": rows},
    )


if __name__ == "__main__":
    main()
