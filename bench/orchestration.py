"""Orchestration overhead: hpsearch run vs a hand-written Optuna script vs Ray Tune, trivial objective.

The objective is tests/fixtures/toy.py (no torch, microseconds per epoch), so every second
measured is orchestration: sampling, storage writes, pruning calls, TensorBoard files.
hpsearch and the Optuna script use the same sampler (TPE, seed 0, multivariate, group),
the same median pruner and a SQLite file each; Ray Tune runs with its defaults (random
search, FIFO scheduler, local cluster), fewer trials. Variants are interleaved per repeat.

    .venv/bin/python bench/orchestration.py                # 200 trials, 3 repeats, ray 40 trials
    .venv/bin/python bench/orchestration.py --smoke
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, TOY, Timer, interleave, median, parser, ratio, write_result

SPACE = """
space:
  lr: {float: [1.0e-4, 1.0], log: true}
  epochs: {int: [1, 3]}
  optimizer:
    choice:
      sgd: {momentum: {float: [0.5, 0.99]}}
      adamw: {beta1: {float: [0.8, 0.95]}}
"""
PRUNER = {"warmup_epochs": 1, "startup_trials": 5}  # hpsearch's defaults, spelled out for the Optuna script


def write_spec(folder: Path, trials: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "orch.yaml"
    spec.write_text(
        f'study: orch\nobjective: "{TOY}:objective"\noutput: {folder / "runs"}\n'
        f"budget: {{trials: {trials}, max_failures: null}}\n"
        f"sampler: {{name: tpe, seed: 0}}\n"
        f"pruner: {{name: median, warmup_epochs: {PRUNER['warmup_epochs']}, startup_trials: {PRUNER['startup_trials']}}}\n"
        + SPACE
    )
    return spec


def run_hpsearch(trials: int) -> dict[str, Any]:
    """In-process, through the library call `hpsearch run` makes."""
    from hpsearch.backends import get_backend
    from hpsearch.spec import load_spec

    with tempfile.TemporaryDirectory() as tmp:
        with Timer() as t:
            spec = load_spec(write_spec(Path(tmp), trials))
            summary = get_backend(spec.backend).run(spec, quiet=True)
    assert summary.finished == trials, summary
    return {"wall_s": t.s, "per_trial_ms": 1000 * t.s / trials, "pruned": summary.pruned}


class _OptunaReporter:
    """What a hand-written script does: report the metric, ask the pruner."""

    def __init__(self, trial: Any):
        self.trial = trial

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        import optuna

        self.trial.report(metrics["val_acc"], epoch)
        if self.trial.should_prune():
            raise optuna.TrialPruned()


def run_optuna(trials: int) -> dict[str, Any]:
    import optuna

    sys.path.insert(0, str(TOY.parent))
    from toy import objective as toy

    optuna.logging.set_verbosity(optuna.logging.ERROR)

    def objective(trial: optuna.Trial) -> float:
        config = {"lr": trial.suggest_float("lr", 1e-4, 1.0, log=True), "epochs": trial.suggest_int("epochs", 1, 3)}
        config["optimizer"] = trial.suggest_categorical("optimizer", ["sgd", "adamw"])
        if config["optimizer"] == "sgd":
            config["momentum"] = trial.suggest_float("optimizer.sgd.momentum", 0.5, 0.99)
        else:
            config["beta1"] = trial.suggest_float("optimizer.adamw.beta1", 0.8, 0.95)
        return toy(config, _OptunaReporter(trial))["val_acc"]

    with tempfile.TemporaryDirectory() as tmp:
        with Timer() as t:
            sampler = optuna.samplers.TPESampler(seed=0, multivariate=True, group=True)
            pruner = optuna.pruners.MedianPruner(
                n_startup_trials=PRUNER["startup_trials"], n_warmup_steps=PRUNER["warmup_epochs"] + 1
            )
            study = optuna.create_study(
                storage=f"sqlite:///{tmp}/study.db", sampler=sampler, pruner=pruner, direction="maximize"
            )
            study.optimize(objective, n_trials=trials)
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in study.get_trials(deepcopy=False))
    return {"wall_s": t.s, "per_trial_ms": 1000 * t.s / trials, "pruned": pruned}


# ---------------------------------------------------------------------------- ray tune


def ray_child(trials: int) -> dict[str, Any]:
    """Runs in its own interpreter: Ray starts a local cluster and leaves threads behind."""
    with Timer() as imp:
        import ray
        from ray import tune
    toy_dir = str(TOY.parent)

    class Reporter:
        def report(self, epoch: int, metrics: dict[str, float]) -> None:
            tune.report(metrics)

    def trainable(config: dict) -> None:
        sys.path.insert(0, toy_dir)  # runs in a Ray worker process
        from toy import objective as toy

        toy(config, Reporter())

    space = {
        "lr": tune.loguniform(1e-4, 1.0),
        "epochs": tune.randint(1, 4),  # upper bound exclusive
        "optimizer": "sgd",
        "momentum": tune.uniform(0.5, 0.99),
    }
    with tempfile.TemporaryDirectory() as tmp:
        with Timer() as init:
            ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        with Timer() as fit:
            tuner = tune.Tuner(
                trainable,
                param_space=space,
                tune_config=tune.TuneConfig(num_samples=trials, metric="val_acc", mode="max"),
                run_config=tune.RunConfig(storage_path=tmp, verbose=0),
            )
            results = tuner.fit()
        done = sum(r.error is None for r in results)
        with Timer() as stop:
            ray.shutdown()
    return {"import_s": imp.s, "init_s": init.s, "fit_s": fit.s, "shutdown_s": stop.s, "completed": done}


def run_ray(trials: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--ray-child", str(trials)], capture_output=True, text=True, cwd=ROOT, timeout=1800
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"ray child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    m = json.loads(lines[-1])
    m["per_trial_ms"] = 1000 * m["fit_s"] / trials
    return m


# ---------------------------------------------------------------------------- CLI start-up


def cli_startup(folder: Path) -> dict[str, Any]:
    """`hpsearch --help`, and `hpsearch run` of a 1-trial study minus the same run in-process."""
    with Timer() as help_t:
        subprocess.run([sys.executable, "-m", "hpsearch.cli", "--help"], cwd=ROOT, capture_output=True, check=True)
    spec = write_spec(folder / "cli", 1)
    with Timer() as run_t:
        proc = subprocess.run([sys.executable, "-m", "hpsearch.cli", "run", str(spec), "--quiet"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    in_process = run_hpsearch(1)["wall_s"]
    return {"help_s": help_t.s, "run_1_trial_s": run_t.s, "in_process_1_trial_s": in_process, "fixed_s": run_t.s - in_process}


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--trials", type=int, default=200, help="trials per hpsearch / Optuna run")
    p.add_argument("--ray-trials", type=int, default=40, help="trials per Ray Tune run (0: skip Ray)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ray-child", type=int, help=argparse_hidden())
    args = p.parse_args(argv)
    if args.ray_child:
        print(json.dumps(ray_child(args.ray_child)))
        return
    started = time.perf_counter()
    if args.smoke:
        args.trials, args.ray_trials, args.repeats = 3, 0, 1
    else:
        run_hpsearch(2), run_optuna(2)  # imports and first-use costs out of the timed runs
    variants = {"hpsearch": lambda r: run_hpsearch(args.trials), "optuna": lambda r: run_optuna(args.trials)}
    if args.ray_trials:
        variants["ray"] = lambda r: run_ray(args.ray_trials)
    runs = interleave(variants, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        startup = cli_startup(Path(tmp))
    report(args, runs, startup, started)


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def report(args: Any, runs: dict[str, list[dict]], startup: dict[str, float], started: float) -> None:
    hp_wall, op_wall = median([m["wall_s"] for m in runs["hpsearch"]]), median([m["wall_s"] for m in runs["optuna"]])
    hp_trial = median([m["per_trial_ms"] for m in runs["hpsearch"]])
    vs_optuna = ratio(hp_wall, op_wall)
    figures: dict[str, Any] = {
        "trials": args.trials,
        "repeats": args.repeats,
        "hpsearch_wall_s": hp_wall,
        "optuna_wall_s": op_wall,
        "hpsearch_over_optuna": vs_optuna,
        "hpsearch_ms_per_trial": hp_trial,
        "optuna_ms_per_trial": median([m["per_trial_ms"] for m in runs["optuna"]]),
        "cli_help_s": startup["help_s"],
        "cli_fixed_startup_s": startup["fixed_s"],
    }
    rows = [
        ["hpsearch (library)", args.trials, f"{hp_wall:.2f}", f"{hp_trial:.1f}", "1.00"],
        ["Optuna script", args.trials, f"{op_wall:.2f}", f"{figures['optuna_ms_per_trial']:.1f}", f"{ratio(op_wall, hp_wall):.2f}"],
    ]
    goal_met = vs_optuna <= 1.25
    notes = [
        f"hpsearch / Optuna wall time: {vs_optuna:.2f}x (medians of {args.repeats} interleaved runs of {args.trials} trials).",
        f"`hpsearch --help` takes {startup['help_s']:.2f} s; `hpsearch run` adds a fixed {startup['fixed_s']:.2f} s "
        f"over the same 1-trial study run in-process (interpreter start, imports, storage creation).",
    ]
    if "ray" in runs:
        ray_trial = median([m["per_trial_ms"] for m in runs["ray"]])
        figures.update(
            ray_trials=args.ray_trials,
            ray_ms_per_trial=ray_trial,
            ray_init_s=median([m["init_s"] for m in runs["ray"]]),
            ray_import_s=median([m["import_s"] for m in runs["ray"]]),
            ray_over_hpsearch_per_trial=ratio(ray_trial, hp_trial),
        )
        rows.append(["Ray Tune (defaults)", args.ray_trials, f"{median([m['fit_s'] for m in runs['ray']]):.2f} (+{figures['ray_init_s']:.1f} init)",
                     f"{ray_trial:.1f}", f"{ratio(ray_trial, hp_trial):.1f} per trial"])
        goal_met = goal_met and figures["ray_over_hpsearch_per_trial"] >= 10
        notes.append(
            f"Ray Tune per-trial overhead is {figures['ray_over_hpsearch_per_trial']:.1f}x hpsearch's "
            f"(Tuner.fit wall / trials, as many trials at once as cores ({os.cpu_count()}) by default; ray.init excluded, "
            f"{figures['ray_init_s']:.1f} s)."
        )
    headline = f"hpsearch {vs_optuna:.2f}x the Optuna script's wall time ({hp_trial:.0f} ms per trial)"
    if "ray" in runs:
        headline += f"; Ray Tune's per-trial overhead {figures['ray_over_hpsearch_per_trial']:.0f}x hpsearch's"
    write_result(
        args.out, "orchestration", "Orchestration overhead (trivial objective)", headline=headline, smoke=args.smoke,
        goal="hpsearch wall ≤ 1.25× the raw Optuna script; ≥ 10× less per-trial overhead than Ray Tune's defaults",
        goal_met=goal_met if not args.smoke else None, figures=figures,
        table={"columns": ["runner", "trials", "wall s (median)", "ms per trial", "vs hpsearch"], "rows": rows},
        notes=notes, started=started,
    )


if __name__ == "__main__":
    main()
