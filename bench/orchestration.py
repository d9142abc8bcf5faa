"""Orchestration overhead: `hpsearch run` vs a hand-written Optuna script vs Ray Tune, trivial objective.

The objective is tests/fixtures/toy.py (no torch, microseconds per epoch, 3 reports per
trial), so every second measured is orchestration: start-up, sampling, storage writes,
pruning calls, TensorBoard files. hpsearch and the Optuna script use the same sampler (TPE,
seed 0, multivariate, group), the same median pruner and a new SQLite file each. Each is a
whole process timed from outside, start-up and imports included: `hpsearch run SPEC --quiet`
against `python script.py`. The Optuna script runs twice: as written (Optuna's SQLite
defaults: rollback journal, fsync per commit) and with the storage settings hpsearch uses
(WAL, synchronous=NORMAL), which separates hpsearch's own per-trial work from its storage
settings. Ray Tune runs with its defaults (random search, FIFO scheduler, a new local
cluster), fewer trials; its per-trial overhead is Tuner.fit's wall time over the trials (as
many at once as cores, its default), ray.init left out. Variants are interleaved per repeat; the
figures are medians; `hpsearch --help` and a 1-trial `hpsearch run` time the CLI's start-up.

    .venv/bin/python -m bench.orchestration                # 150 trials, 5 repeats, Ray 24 trials
    .venv/bin/python -m bench.orchestration --smoke
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import TOY, Timer, hpsearch_cli, in_child, interleave, median, parser, ratio, run_optuna, write_result
from bench.common import write_toy_spec as write_spec

REPEATS, RAY_TRIALS = 5, 24  # interleaved runs of each variant; Ray Tune's trials per run (a trial costs it seconds)


def run_hpsearch(trials: int) -> dict[str, Any]:
    """The whole `hpsearch run SPEC --quiet` process, as a user starts it."""
    with tempfile.TemporaryDirectory() as tmp:
        out, seconds = hpsearch_cli("run", str(write_spec(Path(tmp), trials)), "--quiet")
    pruned = int(out.split(f"{trials} finished (")[1].split(" pruned")[0])
    return {"wall_s": seconds, "per_trial_ms": 1000 * seconds / trials, "pruned": pruned}


def run_script(variant: str, trials: int) -> dict[str, Any]:
    """The whole hand-written script's process, timed from outside like hpsearch's."""
    with Timer() as t:
        m = in_child("bench.orchestration", variant, trials)
    return {**m, "wall_s": t.s, "per_trial_ms": 1000 * t.s / trials}


# ---------------------------------------------------------------------------- ray tune


def ray_child(trials: int) -> dict[str, Any]:
    """Runs in its own interpreter: Ray starts a local cluster and leaves threads behind."""
    with Timer() as imp:
        import ray
        from ray import tune
    toy_path = str(TOY)

    class Reporter:
        def report(self, epoch: int, metrics: dict[str, float]) -> None:
            tune.report(metrics)

    def trainable(config: dict[str, Any]) -> None:
        import runpy  # in a Ray worker process, where bench is not importable

        runpy.run_path(toy_path)["objective"](config, Reporter())

    space = {
        "lr": tune.loguniform(1e-4, 1.0),
        "epochs": tune.randint(1, 4),  # upper bound exclusive
        "optimizer": "sgd",
        "momentum": tune.uniform(0.5, 0.99),
    }
    with tempfile.TemporaryDirectory() as tmp:
        with Timer() as init:
            ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        with Timer() as fit:
            tuner = tune.Tuner(
                trainable,
                param_space=space,
                tune_config=tune.TuneConfig(num_samples=trials, metric="val_acc", mode="max"),
                run_config=tune.RunConfig(storage_path=tmp, verbose=0),
            )
            results = tuner.fit()
        done = len(results) - results.num_errors
        with Timer() as stop:
            ray.shutdown()
    return {"import_s": imp.s, "init_s": init.s, "fit_s": fit.s, "shutdown_s": stop.s, "completed": done}


def run_ray(trials: int) -> dict[str, Any]:
    m = in_child("bench.orchestration", "ray", trials)
    m["per_trial_ms"] = 1000 * m["fit_s"] / trials
    return m


# ---------------------------------------------------------------------------- one run per interpreter


def child(variant: str, trials: int) -> dict[str, Any]:
    if variant in ("optuna", "optuna_wal"):
        return run_optuna(trials, wal=variant == "optuna_wal")
    if variant == "ray":
        return ray_child(trials)
    raise ValueError(variant)


# ---------------------------------------------------------------------------- CLI start-up


def cli_startup(folder: Path) -> dict[str, Any]:
    """`hpsearch --help`, and `hpsearch run` of a 1-trial study."""
    _, help_s = hpsearch_cli("--help")
    _, run_s = hpsearch_cli("run", str(write_spec(folder / "cli", 1)), "--quiet")
    return {"help_s": help_s, "run_1_trial_s": run_s}


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--trials", type=int, default=150, help="trials per hpsearch / Optuna run")
    p.add_argument("--child", choices=["optuna", "optuna_wal", "ray"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.trials)))
        return
    args.ray_trials, args.repeats = RAY_TRIALS, REPEATS
    if args.smoke:
        args.trials, args.ray_trials, args.repeats = 3, 0, 1
    names = ("hpsearch", "optuna") if args.smoke else ("hpsearch", "optuna", "optuna_wal")  # smoke: seconds, not figures
    variants: dict[str, Callable[..., dict[str, Any]]] = {
        name: (lambda r, name=name: run_hpsearch(args.trials) if name == "hpsearch" else run_script(name, args.trials)) for name in names
    }
    if args.ray_trials:
        variants["ray"] = lambda r: run_ray(args.ray_trials)
    runs = interleave(variants, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        startup = cli_startup(Path(tmp))
    report(args, runs, startup)


def report(args: Any, runs: dict[str, list[dict[str, Any]]], startup: dict[str, float]) -> None:
    wall = {k: median([m["wall_s"] for m in v]) for k, v in runs.items() if k != "ray"}
    per_trial = {k: median([m["per_trial_ms"] for m in v]) for k, v in runs.items()}
    hp_trial = per_trial["hpsearch"]
    wall.setdefault("optuna_wal", float("nan"))
    per_trial.setdefault("optuna_wal", float("nan"))
    vs_optuna, vs_wal = ratio(wall["hpsearch"], wall["optuna"]), ratio(wall["hpsearch"], wall["optuna_wal"])
    figures: dict[str, Any] = {
        "trials": args.trials,
        "repeats": args.repeats,
        "hpsearch_over_optuna": vs_optuna,
        "hpsearch_over_optuna_wal": vs_wal,
    }
    figures |= {f"{k}_wall_s": wall[k] for k in wall} | {f"{k}_ms_per_trial": per_trial[k] for k in per_trial if k != "ray"}
    figures |= {f"cli_{k}": v for k, v in startup.items()}  # cli_help_s, cli_run_1_trial_s
    labels = {
        "hpsearch": "`hpsearch run` (whole process)",
        "optuna": "Optuna script (SQLite defaults)",
        "optuna_wal": "Optuna script + WAL, synchronous=NORMAL",
    }
    rows = [[labels[k], args.trials, f"{wall[k]:.2f}", f"{per_trial[k]:.1f}", f"{ratio(wall['hpsearch'], wall[k]):.2f}"] for k in labels]
    goal_met = vs_optuna <= 1.25
    if "ray" in runs:
        ray_trial = median([m["per_trial_ms"] for m in runs["ray"]])
        figures.update(
            ray_trials=args.ray_trials,
            ray_ms_per_trial=ray_trial,
            ray_init_s=median([m["init_s"] for m in runs["ray"]]),
            ray_import_s=median([m["import_s"] for m in runs["ray"]]),
            ray_over_hpsearch_per_trial=ratio(ray_trial, hp_trial),
        )
        rows.append(
            [
                "Ray Tune (defaults)",
                args.ray_trials,
                f"{median([m['fit_s'] for m in runs['ray']]):.2f} (+{figures['ray_init_s']:.1f} init)",
                f"{ray_trial:.1f}",
                f"1/{ratio(ray_trial, hp_trial):.1f} per trial",
            ]
        )
        goal_met = goal_met and figures["ray_over_hpsearch_per_trial"] >= 10
    headline = f"hpsearch {vs_optuna:.2f}x the Optuna script's wall time ({vs_wal:.2f}x the script given hpsearch's SQLite settings; "
    headline += f"{hp_trial:.0f} ms per trial)" + (
        f"; Ray Tune's per-trial overhead {ratio(per_trial['ray'], hp_trial):.0f}x hpsearch's" if "ray" in runs else ""
    )
    write_result(
        args,
        "orchestration",
        "Orchestration overhead (trivial objective)",
        headline=headline,
        goal="hpsearch wall ≤ 1.25× the raw Optuna script; ≥ 10× less per-trial overhead than Ray Tune's defaults",
        goal_met=goal_met,
        figures=figures,
        table={"columns": ["runner", "trials", "wall s (median)", "ms per trial", "hpsearch / runner"], "rows": rows},
    )


if __name__ == "__main__":
    main()
