"""Growth: seconds of overhead per trial when a study holds ~100 and ~1,000 trials, and where it goes.

One study of `--trials` trivial trials (tests/fixtures/toy.py, 1-3 epochs, TPE + median
pruner, default SQLite storage) runs in-process; timers wrapped around hpsearch's own steps
split each trial's wall time into: claim (lock, stale-trial check, study.ask, first
heartbeat), sampler (Optuna TPE, through Space.suggest), pruner (trial.report +
should_prune), reporter (TensorBoard events, history), trial attributes (the user_attrs
written per trial), progress (counts and best so far, read from storage), objective, other
hpsearch steps, and the rest of the trial's lifecycle (heartbeat thread, tell, re-read). A hand-written Optuna
script on the same space, sampler and pruner runs the same number of trials for comparison,
each run in a fresh interpreter, interleaved (hpsearch, Optuna) per repeat.

    .venv/bin/python bench/growth.py                       # 1000 trials, windows at 100 and 950
    .venv/bin/python bench/growth.py --smoke
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import itertools
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import Timer, interleave, median, parser, ratio, write_result
from orchestration import in_child, run_optuna, write_spec

CATEGORIES = ("claim", "sampler", "pruner", "reporter", "trial_attrs", "progress", "objective", "other_hpsearch", "lifecycle")


class Clock:
    """Seconds per category, per trial number; `current` is the trial being run."""

    def __init__(self) -> None:
        self.current = -1
        self.raw: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.last_end: float | None = None

    def timed(self, key: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.raw[self.current][key] += time.perf_counter() - start

        return wrapper

    def split(self, number: int) -> dict[str, float]:
        r = self.raw[number]
        parts = {
            "claim": r["claim"],
            "sampler": r["suggest"],
            "pruner": r["prune"],
            "reporter": r["report"] - r["prune"] + r["close"],
            "trial_attrs": r["record"],
            "progress": r["refresh"],
            "objective": r["run_trial"] - r["report"],
        }
        parts["other_hpsearch"] = r["fn"] - r["suggest"] - r["run_trial"] - r["record"] - r["close"]
        parts["lifecycle"] = r["interval"] - r["claim"] - r["fn"] - r["refresh"]
        return parts


@contextlib.contextmanager
def instrumented(clock: Clock):
    """Wrap the steps of hpsearch's trial loop (hpsearch.workers.work) with timers; undone on exit.

    claim: file lock, stale-trial check, count, study.ask, first heartbeat, worker attribute.
    lifecycle: the rest of a trial's gap: heartbeat thread, study.tell, re-reading the trial, its line.
    """
    import hpsearch.backends.optuna as hb
    import hpsearch.workers as hw
    from hpsearch.reporter import Reporter
    from hpsearch.space import Space

    saved = [
        (hw, "trial_function", hw.trial_function), (hw, "claim", hw.claim), (hw, "refresh", hw.refresh),
        (hb, "prune_hook", hb.prune_hook), (hb, "record", hb.record), (hb, "run_trial", hb.run_trial),
        (Reporter, "report", Reporter.report), (Reporter, "close", Reporter.close), (Space, "suggest", Space.suggest),
    ]
    original_trial_function, original_prune_hook, original_refresh = hw.trial_function, hb.prune_hook, hw.refresh

    def trial_function(*args: Any) -> Callable:
        fn = original_trial_function(*args)

        def timed_fn(trial: Any) -> Any:
            clock.current = trial.number
            return clock.timed("fn", fn)(trial)

        return timed_fn

    def prune_hook(*args: Any) -> Any:
        hook = original_prune_hook(*args)
        return clock.timed("prune", hook) if hook is not None else None

    def refresh(*args: Any) -> Any:
        """Called once per trial after it ends (and once before the first): the end of a trial's gap."""
        result = clock.timed("refresh", original_refresh)(*args)
        now = time.perf_counter()
        if clock.last_end is not None and clock.current >= 0:
            clock.raw[clock.current]["interval"] = now - clock.last_end
        clock.last_end = now
        return result

    hw.trial_function, hw.refresh, hb.prune_hook = trial_function, refresh, prune_hook
    hw.claim = clock.timed("claim", hw.claim)
    hb.record, hb.run_trial = clock.timed("record", hb.record), clock.timed("run_trial", hb.run_trial)
    Reporter.report, Reporter.close = clock.timed("report", Reporter.report), clock.timed("close", Reporter.close)
    Space.suggest = clock.timed("suggest", Space.suggest)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def run_hpsearch(trials: int) -> dict[str, Any]:
    from hpsearch.backends import get_backend
    from hpsearch.spec import load_spec

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp, instrumented(clock), contextlib.redirect_stdout(io.StringIO()):
        spec = load_spec(write_spec(Path(tmp), trials))
        with Timer() as t:
            get_backend(spec.backend).run(spec, quiet=True)
    intervals = {n: r["interval"] for n, r in clock.raw.items() if r.get("interval")}
    return {"wall_s": t.s, "intervals": intervals, "split": {n: clock.split(n) for n in intervals}}


def run_optuna_timed(trials: int) -> dict[str, Any]:
    """orchestration.run_optuna with a timestamp at the end of every trial."""
    stamps: dict[int, float] = {}
    m = run_optuna(trials, callbacks=[lambda study, trial: stamps.__setitem__(trial.number, time.perf_counter())])
    numbers = sorted(stamps)
    m["intervals"] = {n: stamps[n] - stamps[p] for p, n in itertools.pairwise(numbers)}
    return m


def child(variant: str, trials: int) -> dict[str, Any]:
    import optuna  # noqa: F401 (imported before the timer starts)

    import hpsearch.workers  # noqa: F401

    return run_hpsearch(trials) if variant == "hpsearch" else run_optuna_timed(trials)


def from_child(variant: str, trials: int) -> dict[str, Any]:
    """A fresh interpreter per run (hpsearch's SQLite settings are process-wide); JSON keys back to trial numbers."""
    m = in_child(variant, trials, __file__)
    m["intervals"] = {int(k): v for k, v in m["intervals"].items()}
    if "split" in m:
        m["split"] = {int(k): v for k, v in m["split"].items()}
    return m


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
    p.add_argument("--window", type=int, default=50, help="trials per measuring window")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--child", choices=["hpsearch", "optuna"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.trials)))
        return
    started = time.perf_counter()
    if args.smoke:
        args.trials, args.window = 12, 4
    small, large = (args.trials // 10, args.trials - args.window)  # the windows start at ~10% and at the end
    windows = {f"{small}": (small, small + args.window), f"{large}": (large, args.trials)}
    runs = interleave({name: (lambda r, name=name: from_child(name, args.trials)) for name in ("hpsearch", "optuna")}, args.repeats)

    figures: dict[str, Any] = {"trials": args.trials, "window": args.window, "repeats": args.repeats}
    rows = []
    for label, (lo, hi) in windows.items():
        hp = median([window_ms(m["intervals"], lo, hi) for m in runs["hpsearch"]])
        op = median([window_ms(m["intervals"], lo, hi) for m in runs["optuna"]])
        split = {c: median([window_split(m["split"], lo, hi)[c] for m in runs["hpsearch"]]) for c in CATEGORIES}
        figures[f"at_{label}"] = {"hpsearch_ms_per_trial": hp, "optuna_ms_per_trial": op, "hpsearch_over_optuna": ratio(hp, op), "split_ms": split}
        rows.append([f"trials {lo}-{hi - 1}", f"{hp:.1f}", f"{op:.1f}", f"{ratio(hp, op):.2f}", *(f"{split[c]:.1f}" for c in CATEGORIES)])
    a, b = (figures[f"at_{k}"]["hpsearch_ms_per_trial"] for k in windows)
    figures["growth_ratio"] = ratio(b, a)
    last = figures[f"at_{large}"]["split_ms"]
    hp_own = sum(last[c] for c in ("claim", "reporter", "trial_attrs", "progress", "other_hpsearch", "lifecycle"))
    notes = [
        (f"Per-trial wall time grows {figures['growth_ratio']:.1f}x from ~{small} to ~{large} trials; "
        f"at ~{large} trials the sampler takes {last['sampler']:.0f} ms and hpsearch's own steps "
        f"(claim, reporter, trial attributes, progress, other, lifecycle) {hp_own:.0f} ms of {b:.0f} ms."),
        "Windows: median of the gaps between consecutive trial ends (ms); split columns: mean ms per trial.",
    ]
    ops = [figures[f"at_{k}"]["optuna_ms_per_trial"] for k in windows]
    headline = (f"{a:.0f} ms per trial at ~{small} trials, {b:.0f} ms at ~{large} "
                f"(Optuna script: {ops[0]:.0f} and {ops[1]:.0f} ms); sampler {last['sampler']:.0f} ms of it at ~{large}")
    write_result(
        args.out, "growth", "Growth: overhead per trial at ~100 and ~1,000 trials", headline=headline, smoke=args.smoke,
        goal="(no target) report the overhead per trial and where it goes", goal_met=None, figures=figures,
        table={"columns": ["window", "hpsearch ms/trial", "Optuna script ms/trial", "ratio", *CATEGORIES], "rows": rows},
        notes=notes, started=started,
    )


if __name__ == "__main__":
    main()
