"""Orchestration overhead: `hpsearch run` vs a hand-written Optuna script vs Ray Tune, trivial objective.

The objective is tests/fixtures/toy.py (no torch, 3 reports per trial), so every second measured
is orchestration: start-up, sampling, storage writes, pruning calls, TensorBoard files. hpsearch
and a hand-written Optuna script use the same sampler (TPE, seed 0, multivariate, group), median
pruner and a new SQLite file each, each a whole process timed from outside. The script runs with
Optuna's SQLite defaults and with hpsearch's storage settings (WAL, synchronous=NORMAL), which
separates hpsearch's own per-trial work from its storage settings. Ray Tune runs with its
defaults (random search, FIFO, a new local cluster) and fewer trials; its per-trial overhead is
Tuner.fit's wall time over the trials, ray.init left out. Variants are interleaved per repeat,
figures are medians; `hpsearch --help` and a 1-trial `hpsearch run` time the CLI's start-up.
bench.growth runs the same toy study (write_spec, run_optuna) to 1,000 trials.

    .venv/bin/python -m bench.orchestration                # 150 trials, 5 repeats, Ray 24 trials
    .venv/bin/python -m bench.orchestration --smoke
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import ROOT, TOY, Timer, hpsearch_cli, interleave, median, parser, ratio, write_result

REPEATS, RAY_TRIALS = 5, 24  # interleaved runs of each variant; Ray Tune's trials per run (a trial costs it seconds)
EPOCHS, STARTUP, WARMUP = 3, 5, 1  # the toy's reports per trial; hpsearch's median pruner defaults, spelled out for Optuna
LABELS = {
    "hpsearch": "`hpsearch run` (whole process)",
    "optuna": "Optuna script (SQLite defaults)",
    "optuna_wal": "Optuna script + WAL, synchronous=NORMAL",
}


def write_spec(folder: Path, trials: int, sampler: str = "tpe") -> Path:
    """The toy study as an hpsearch spec: the same space, sampler and pruner as run_optuna's script
    (``sampler: auto``: what hpsearch picks, TPE past bo's 300 trials)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "orch.yaml"
    spec.write_text(
        f'study: orch\nobjective: "{TOY}:objective"\noutput: {folder / "runs"}\nbudget: {{trials: {trials}, max_failures: null}}\n'
        f"sampler: {{name: {sampler}, seed: 0}}\npruner: {{name: median, warmup_epochs: {WARMUP}, startup_trials: {STARTUP}, trust: null}}\n"
        f"fixed: {{epochs: {EPOCHS}}}\nspace:\n  lr: {{float: [1.0e-4, 1.0], log: true}}\n  optimizer:\n    choice:\n"
        "      sgd: {momentum: {float: [0.5, 0.99]}}\n      adamw: {beta1: {float: [0.8, 0.95]}}\n"
    )
    return spec


def run_optuna(trials: int, wal: bool = False, callbacks: list[Any] | None = None) -> dict[str, Any]:
    """The toy study as a plain Optuna script (TPE, median pruner, SQLite): seconds and pruned
    trials. ``wal``: the SQLite settings hpsearch.study.storage uses, WAL (per file) and
    synchronous=NORMAL (per connection)."""
    import runpy
    import sqlite3

    import optuna
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    toy = runpy.run_path(str(TOY))["objective"]  # tests/ is no package
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    class Reporter:  # what a hand-written script does: report the metric, ask the pruner
        def __init__(self, trial: optuna.Trial) -> None:
            self.trial = trial

        def report(self, epoch: int, metrics: dict[str, float]) -> None:
            self.trial.report(metrics["val_acc"], epoch)
            if self.trial.should_prune():
                raise optuna.TrialPruned()

    def objective(trial: optuna.Trial) -> float:
        config: dict[str, Any] = {"lr": trial.suggest_float("lr", 1e-4, 1.0, log=True), "epochs": EPOCHS}
        config["optimizer"] = trial.suggest_categorical("optimizer", ["sgd", "adamw"])
        if config["optimizer"] == "sgd":
            config["momentum"] = trial.suggest_float("optimizer.sgd.momentum", 0.5, 0.99)
        else:
            config["beta1"] = trial.suggest_float("optimizer.adamw.beta1", 0.8, 0.95)
        return float(toy(config, Reporter(trial))["val_acc"])

    with tempfile.TemporaryDirectory() as tmp:
        if wal:
            with sqlite3.connect(Path(tmp) / "study.db") as db:
                db.execute("PRAGMA journal_mode=WAL")
            event.listen(Engine, "connect", lambda conn, _record: conn.execute("PRAGMA synchronous=NORMAL"))
        with Timer() as t, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # group= is experimental: Optuna warns
            sampler = optuna.samplers.TPESampler(seed=0, multivariate=True, group=True)
            pruner = optuna.pruners.MedianPruner(n_startup_trials=STARTUP, n_warmup_steps=WARMUP + 1)
            study = optuna.create_study(storage=f"sqlite:///{tmp}/study.db", sampler=sampler, pruner=pruner, direction="maximize")
            study.optimize(objective, n_trials=trials, callbacks=callbacks)
        pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in study.get_trials(deepcopy=False))
    return {"wall_s": t.s, "per_trial_ms": 1000 * t.s / trials, "pruned": pruned}


def in_child(module: str, variant: str, trials: int) -> dict[str, Any]:
    """``python -m MODULE --child VARIANT --trials N`` in a fresh interpreter (hpsearch's SQLite
    settings are process-wide, and Ray leaves threads behind), timed from outside; the last JSON
    line it printed, with ``wall_s``."""
    with Timer() as t:
        cmd = [sys.executable, "-m", module, "--child", variant, "--trials", str(trials)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{variant} run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result | {"wall_s": t.s}


def run_hpsearch(trials: int) -> dict[str, Any]:
    """The whole `hpsearch run SPEC --quiet` process, as a user starts it."""
    with tempfile.TemporaryDirectory() as tmp:
        out, seconds = hpsearch_cli("run", str(write_spec(Path(tmp), trials)), "--quiet")
    pruned = int(out.split(f"{trials} finished (")[1].split(" pruned")[0])
    return {"wall_s": seconds, "per_trial_ms": 1000 * seconds / trials, "pruned": pruned}


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

    # epochs: randint's upper bound is exclusive
    space = {"lr": tune.loguniform(1e-4, 1.0), "epochs": tune.randint(1, 4), "optimizer": "sgd", "momentum": tune.uniform(0.5, 0.99)}
    with tempfile.TemporaryDirectory() as tmp:
        with Timer() as init:
            ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        with Timer() as fit:
            config = tune.TuneConfig(num_samples=trials, metric="val_acc", mode="max")
            tuner = tune.Tuner(trainable, param_space=space, tune_config=config, run_config=tune.RunConfig(storage_path=tmp, verbose=0))
            results = tuner.fit()
        with Timer() as stop:
            ray.shutdown()
    return {"import_s": imp.s, "init_s": init.s, "fit_s": fit.s, "shutdown_s": stop.s, "completed": len(results) - results.num_errors}


def run_variant(name: str, trials: int) -> dict[str, Any]:
    if name == "hpsearch":
        return run_hpsearch(trials)
    m = in_child("bench.orchestration", name, trials)
    return m | {"per_trial_ms": 1000 * (m["fit_s"] if name == "ray" else m["wall_s"]) / trials}


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--trials", type=int, default=150, help="trials per hpsearch / Optuna run")
    p.add_argument("--child", choices=["optuna", "optuna_wal", "ray"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(ray_child(args.trials) if args.child == "ray" else run_optuna(args.trials, wal=args.child == "optuna_wal")))
        return
    args.ray_trials, args.repeats = (0, 1) if args.smoke else (RAY_TRIALS, REPEATS)
    if args.smoke:
        args.trials = 3
    names = ("hpsearch", "optuna") if args.smoke else ("hpsearch", "optuna", "optuna_wal")  # smoke: seconds, not figures
    variants: dict[str, Callable[..., dict[str, Any]]] = {name: (lambda r, name=name: run_variant(name, args.trials)) for name in names}
    if args.ray_trials:
        variants["ray"] = lambda r: run_variant("ray", args.ray_trials)
    runs = interleave(variants, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        _, help_s = hpsearch_cli("--help")
        _, run_s = hpsearch_cli("run", str(write_spec(Path(tmp) / "cli", 1)), "--quiet")  # a 1-trial study
    report(args, runs, {"help_s": help_s, "run_1_trial_s": run_s})


def report(args: Any, runs: dict[str, list[dict[str, Any]]], startup: dict[str, float]) -> None:
    wall = {k: median([m["wall_s"] for m in runs.get(k, [])]) for k in LABELS}  # nan for a variant not run
    per_trial = {k: median([m["per_trial_ms"] for m in runs.get(k, [])]) for k in [*LABELS, "ray"]}
    hp_trial = per_trial["hpsearch"]
    vs_optuna, vs_wal = ratio(wall["hpsearch"], wall["optuna"]), ratio(wall["hpsearch"], wall["optuna_wal"])
    figures: dict[str, Any] = {"trials": args.trials, "repeats": args.repeats, "hpsearch_over_optuna": vs_optuna}
    figures |= {"hpsearch_over_optuna_wal": vs_wal} | {f"{k}_wall_s": v for k, v in wall.items()}
    figures |= {f"{k}_ms_per_trial": v for k, v in per_trial.items() if k != "ray"}
    figures |= {f"cli_{k}": v for k, v in startup.items()}  # cli_help_s, cli_run_1_trial_s
    rows = [[LABELS[k], args.trials, f"{wall[k]:.2f}", f"{per_trial[k]:.1f}", f"{ratio(wall['hpsearch'], wall[k]):.2f}"] for k in LABELS]
    headline = f"hpsearch {vs_optuna:.2f}x the Optuna script's wall time ({vs_wal:.2f}x the script given hpsearch's SQLite settings; "
    headline += f"{hp_trial:.0f} ms per trial)"
    if "ray" in runs:
        over = ratio(per_trial["ray"], hp_trial)
        ray = {"ray_trials": args.ray_trials, "ray_ms_per_trial": per_trial["ray"]}
        ray |= {f"ray_{k}": median([m[k] for m in runs["ray"]]) for k in ("init_s", "import_s")}
        figures |= ray | {"ray_over_hpsearch_per_trial": over}
        wall_s = f"{median([m['fit_s'] for m in runs['ray']]):.2f} (+{ray['ray_init_s']:.1f} init)"
        rows.append(["Ray Tune (defaults)", args.ray_trials, wall_s, f"{per_trial['ray']:.1f}", f"1/{over:.1f} per trial"])
        headline += f"; Ray Tune's per-trial overhead {over:.0f}x hpsearch's"
    write_result(
        args,
        "orchestration",
        "Orchestration overhead (trivial objective)",
        headline=headline,
        goal="hpsearch wall ≤ 1.25× the raw Optuna script; ≥ 10× less per-trial overhead than Ray Tune's defaults",
        goal_met=vs_optuna <= 1.25 and figures.get("ray_over_hpsearch_per_trial", 10) >= 10,
        figures=figures,
        table={"columns": ["runner", "trials", "wall s (median)", "ms per trial", "hpsearch / runner"], "rows": rows},
    )


if __name__ == "__main__":
    main()
