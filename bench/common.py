"""Shared by the bench scripts: machine description, interleaved timing, hpsearch as a user runs
it, JSON results. Standard library only at import: bench.tier_b_table runs where hpsearch is not
installed.

Each script writes bench/results/<name>.json (committed) with the keys below; bench.run_all
renders BENCHMARKS.md from those files only, so every figure there has a rerunnable source.

    name, title, headline, command, date, duration_s, machine, smoke, goal, goal_met, figures, table, notes

Timings on a shared machine are noisy, so figures are ratios of variants measured side by
side in one run: A, B, A, B, ... and the median of each.

Its sections: the machine and the result file; timing; a hand-written Optuna script on the toy
objective (orchestration, growth).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TOY = ROOT / "tests" / "fixtures" / "toy.py"


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    p.add_argument("--smoke", action="store_true", help="a tiny run that checks the script works (seconds; no meaningful figures)")
    p.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON result (default: bench/results)")
    p.set_defaults(started=time.perf_counter())  # the run's duration in its result counts from here
    return p


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)  # no import: ray takes seconds to import
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine() -> dict[str, Any]:
    """What a reader needs to judge a figure: cores, CPU, GPU, library versions, load."""
    gpu = None
    if "torch" in sys.modules:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "gpu": gpu,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "optuna": _version("optuna"),
        "ray": _version("ray"),
        "load_avg_1_5_15": load_average(),  # other jobs on the machine; ratios, not absolutes, are the figures
    }


def command(module: str, argv: Iterable[str] | None = None) -> str:
    """``python -m MODULE ARGS`` as typed from the checkout's root (path arguments made relative to it)."""
    return " ".join([".venv/bin/python -m", module, *(shlex.quote(_from_root(a)) for a in (sys.argv[1:] if argv is None else argv))])


def _from_root(arg: str) -> str:
    path = Path(arg)
    if arg.startswith("-") or not path.exists():
        return arg
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return arg


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def interleave(variants: Mapping[str, Callable[..., dict[str, Any]]], repeats: int) -> dict[str, list[dict[str, Any]]]:
    """Run variant A, B, ..., A, B, ... `repeats` times; fn(repeat) -> measurements."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for r in range(repeats):
        order = list(variants) if r % 2 == 0 else list(variants)[::-1]  # neither always goes first
        for name in order:
            runs[name].append(variants[name](r))
            brief = ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in runs[name][-1].items() if not isinstance(v, list | dict)
            )
            print(f"  repeat {r}: {name}: {brief}", flush=True)
    return runs


class Timer:
    def __enter__(self) -> Self:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.s = time.perf_counter() - self.start


def hpsearch_cli(*args: str, sets: Iterable[str] = (), env: dict[str, str] | None = None) -> tuple[str, float]:
    """``hpsearch ARGS --set S ...`` in a fresh process from the checkout's root, as a user runs it:
    its stdout and wall seconds. A failure stops the benchmark with the command and its output."""
    cmd = [sys.executable, "-m", "hpsearch.cli", *args, *(a for s in sets for a in ("--set", s))]
    with Timer() as t:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout, t.s


def write_result(
    args: argparse.Namespace,
    name: str,
    title: str,
    *,
    headline: str,
    goal: str,
    figures: dict[str, Any],
    goal_met: bool | None = None,
    table: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> Path:
    """ARGS.out/NAME.json of the script bench.NAME (ARGS: its parser()'s); `table` is {"columns":
    [...], "rows": [[...], ...]}; goal_met None: no target, or a --smoke run (never measured)."""
    result = {
        "name": name,
        "title": title,
        "headline": headline,  # one line for BENCHMARKS.md's summary table
        "command": command(f"bench.{name}"),
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - args.started, 1),
        "machine": machine(),
        "smoke": args.smoke,
        "goal": goal,
        "goal_met": None if args.smoke else goal_met,
        "figures": figures,
        "table": table or {"columns": [], "rows": []},
        "notes": notes or [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path: Path = args.out / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v)) + "\n")
    print(f"wrote {path}")
    return path


# ---------------------------------------------------------------------------- a hand-written Optuna script on the toy objective

TOY_EPOCHS = 3  # reports per trial
TOY_SETS = [f"objective={TOY}:objective", "metric=val_acc", "direction=maximize"]  # --set: a search of the toy, no torch (smoke runs)
TOY_PRUNER = {"warmup_epochs": 1, "startup_trials": 5}  # hpsearch's defaults, spelled out for the Optuna script


def write_toy_spec(folder: Path, trials: int) -> Path:
    """The toy study as an hpsearch spec: the same space, sampler and pruner as run_optuna's script."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "orch.yaml"
    spec.write_text(
        f'study: orch\nobjective: "{TOY}:objective"\noutput: {folder / "runs"}\n'
        f"budget: {{trials: {trials}, max_failures: null}}\n"
        f"sampler: {{name: tpe, seed: 0}}\n"
        f"pruner: {{name: median, warmup_epochs: {TOY_PRUNER['warmup_epochs']}, startup_trials: {TOY_PRUNER['startup_trials']}}}\n"
        f"fixed: {{epochs: {TOY_EPOCHS}}}\n"
        "space:\n  lr: {float: [1.0e-4, 1.0], log: true}\n  optimizer:\n    choice:\n"
        "      sgd: {momentum: {float: [0.5, 0.99]}}\n      adamw: {beta1: {float: [0.8, 0.95]}}\n"
    )
    return spec


class _OptunaReporter:
    """What a hand-written script does: report the metric, ask the pruner."""

    def __init__(self, trial: Any):
        self.trial = trial

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        import optuna

        self.trial.report(metrics["val_acc"], epoch)
        if self.trial.should_prune():
            raise optuna.TrialPruned()


def sqlite_like_hpsearch(path: Path) -> None:
    """WAL journal (persistent, per file) and synchronous=NORMAL (per connection), as hpsearch.study.storage sets."""
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
    event.listen(Engine, "connect", lambda conn, _record: conn.execute("PRAGMA synchronous=NORMAL"))


def run_optuna(trials: int, wal: bool = False, callbacks: list[Any] | None = None) -> dict[str, Any]:
    """The toy study as a plain Optuna script (TPE, median pruner, SQLite): seconds and pruned trials."""
    import runpy

    import optuna

    toy = runpy.run_path(str(TOY))["objective"]  # tests/ is no package
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    def objective(trial: optuna.Trial) -> float:
        config: dict[str, Any] = {"lr": trial.suggest_float("lr", 1e-4, 1.0, log=True), "epochs": TOY_EPOCHS}
        config["optimizer"] = trial.suggest_categorical("optimizer", ["sgd", "adamw"])
        if config["optimizer"] == "sgd":
            config["momentum"] = trial.suggest_float("optimizer.sgd.momentum", 0.5, 0.99)
        else:
            config["beta1"] = trial.suggest_float("optimizer.adamw.beta1", 0.8, 0.95)
        return float(toy(config, _OptunaReporter(trial))["val_acc"])

    with tempfile.TemporaryDirectory() as tmp:
        if wal:
            sqlite_like_hpsearch(Path(tmp) / "study.db")
        with Timer() as t, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # group= is experimental: Optuna warns
            sampler = optuna.samplers.TPESampler(seed=0, multivariate=True, group=True)
            pruner = optuna.pruners.MedianPruner(
                n_startup_trials=TOY_PRUNER["startup_trials"], n_warmup_steps=TOY_PRUNER["warmup_epochs"] + 1
            )
            study = optuna.create_study(storage=f"sqlite:///{tmp}/study.db", sampler=sampler, pruner=pruner, direction="maximize")
            study.optimize(objective, n_trials=trials, callbacks=callbacks)
        pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in study.get_trials(deepcopy=False))
    return {"wall_s": t.s, "per_trial_ms": 1000 * t.s / trials, "pruned": pruned}


def in_child(module: str, variant: str, trials: int) -> dict[str, Any]:
    """``python -m MODULE --child VARIANT --trials N`` in a fresh interpreter (hpsearch's SQLite
    settings are process-wide, and Ray leaves threads behind); the last JSON line it printed."""
    cmd = [sys.executable, "-m", module, "--child", variant, "--trials", str(trials)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{variant} run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result
