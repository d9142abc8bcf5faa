"""Growth: seconds of overhead per trial when a study holds ~100 and ~1,000 trials, and where it goes.

One study of `--trials` trivial trials (tests/fixtures/toy.py, 1-3 epochs, TPE + median
pruner, default SQLite storage) runs in-process; timers wrapped around hpsearch's own steps
split each trial's wall time into: sampler (Optuna TPE, through Space.suggest), pruner
(trial.report + should_prune), reporter (TensorBoard events, history), trial attributes
(the user_attrs written per trial), tracker (progress counts, best so far), objective, and
Optuna's trial lifecycle (create, heartbeat, stale-trial check, tell). A hand-written Optuna
script on the same space, sampler and pruner runs the same number of trials for comparison,
interleaved (hpsearch, Optuna) per repeat.

    .venv/bin/python bench/growth.py                       # 1000 trials, windows at 100 and 950
    .venv/bin/python bench/growth.py --smoke
"""

from __future__ import annotations

import contextlib
import functools
import io
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import Timer, interleave, median, parser, ratio, write_result
from orchestration import run_optuna, write_spec

CATEGORIES = ("sampler", "pruner", "reporter", "trial_attrs", "tracker", "objective", "other_hpsearch", "optuna_lifecycle")


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
            "sampler": r["suggest"],
            "pruner": r["prune"],
            "reporter": r["report"] - r["prune"] + r["close"],
            "trial_attrs": r["record"],
            "tracker": r["after_trial"],
            "objective": r["run_trial"] - r["report"],
        }
        parts["other_hpsearch"] = r["fn"] - r["suggest"] - r["run_trial"] - r["record"] - r["close"]
        parts["optuna_lifecycle"] = r["interval"] - r["fn"] - r["after_trial"]
        return parts


@contextlib.contextmanager
def instrumented(clock: Clock):
    """Wrap hpsearch's per-trial steps with timers; undone on exit."""
    import hpsearch.backends.optuna as hb
    from hpsearch.reporter import Reporter
    from hpsearch.space import Space

    saved = [
        (hb, "trial_function", hb.trial_function), (hb, "prune_hook", hb.prune_hook), (hb, "record", hb.record),
        (hb, "run_trial", hb.run_trial), (hb.Tracker, "after_trial", hb.Tracker.after_trial),
        (Reporter, "report", Reporter.report), (Reporter, "close", Reporter.close), (Space, "suggest", Space.suggest),
    ]
    original_trial_function, original_prune_hook, original_after = hb.trial_function, hb.prune_hook, hb.Tracker.after_trial

    def trial_function(*args: Any) -> Callable:
        fn = original_trial_function(*args)

        def timed_fn(trial: Any) -> Any:
            clock.current = trial.number
            return clock.timed("fn", fn)(trial)

        return timed_fn

    def prune_hook(*args: Any) -> Any:
        hook = original_prune_hook(*args)
        return clock.timed("prune", hook) if hook is not None else None

    def after_trial(self: Any, study: Any, trial: Any) -> None:
        clock.timed("after_trial", original_after)(self, study, trial)
        now = time.perf_counter()
        if clock.last_end is not None:
            clock.raw[trial.number]["interval"] = now - clock.last_end
        clock.last_end = now

    hb.trial_function, hb.prune_hook, hb.Tracker.after_trial = trial_function, prune_hook, after_trial
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
    """orchestration.run_optuna with a per-trial timestamp callback."""
    import optuna

    stamps: dict[int, float] = {}
    original = optuna.Study.optimize

    def optimize(self: Any, func: Any, **kwargs: Any) -> Any:
        kwargs["callbacks"] = [lambda study, trial: stamps.__setitem__(trial.number, time.perf_counter())]
        return original(self, func, **kwargs)

    optuna.Study.optimize = optimize
    try:
        m = run_optuna(trials)
    finally:
        optuna.Study.optimize = original
    numbers = sorted(stamps)
    m["intervals"] = {n: stamps[n] - stamps[p] for p, n in zip(numbers, numbers[1:])}
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
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.smoke:
        args.trials, args.window = 12, 4
    small, large = (args.trials // 10, args.trials - args.window)  # the windows start at ~10% and at the end
    windows = {f"{small}": (small, small + args.window), f"{large}": (large, args.trials)}
    runs = interleave({"hpsearch": lambda r: run_hpsearch(args.trials), "optuna": lambda r: run_optuna_timed(args.trials)}, args.repeats)

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
    hp_own = sum(last[c] for c in ("reporter", "trial_attrs", "tracker", "other_hpsearch"))
    notes = [
        f"Per-trial wall time grows {figures['growth_ratio']:.1f}x from ~{small} to ~{large} trials; "
        f"at ~{large} trials the sampler takes {last['sampler']:.0f} ms and hpsearch's own steps "
        f"(reporter, trial attributes, tracker, other) {hp_own:.0f} ms of {b:.0f} ms.",
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
