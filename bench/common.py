"""Shared by every bench script: machine description, interleaved timing, JSON results.

Each script writes bench/results/<name>.json (committed) with the keys below; run_all.py
renders BENCHMARKS.md from those files only, so every figure there has a rerunnable source.

    name, title, headline, command, date, duration_s, machine, smoke, goal, goal_met, figures, table, notes

Timings on a shared machine are noisy, so figures are ratios of variants measured side by
side in one run: A, B, A, B, ... and the median of each.

This is the only module bench scripts import from (they never import each other). Its
sections: the machine and the result file; timing; the Fashion-MNIST task of bench/spaces/
(searches cut at an epoch budget, retrains, best-so-far curves); trainings of one config with
a boolean objective key off and on (denormals, fused_optimizer); a hand-written Optuna script
on the toy objective (orchestration, growth).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TOY = ROOT / "tests" / "fixtures" / "toy.py"
BENCH_SPEC = ROOT / "bench" / "spaces" / "bench_fashion.yaml"  # the Fashion-MNIST task most CPU benchmarks train

if str(ROOT) not in sys.path:  # `python bench/x.py` from anywhere imports hpsearch and objectives
    sys.path.insert(0, str(ROOT))


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    p.add_argument("--smoke", action="store_true", help="a tiny run that checks the script works (seconds; no meaningful figures)")
    p.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON result (default: bench/results)")
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


def command() -> str:
    rel = Path(sys.argv[0]).resolve()
    try:
        rel = rel.relative_to(ROOT)
    except ValueError:
        pass
    return " ".join([".venv/bin/python", str(rel), *(shlex.quote(_from_root(a)) for a in sys.argv[1:])])


def _from_root(arg: str) -> str:
    """A path argument as typed from the checkout's root, where the command line is shown to be run."""
    path = Path(arg)
    if arg.startswith("-") or not path.exists():
        return arg
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return arg


def random_configs(spec_path: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` configs of the spec's space drawn by Optuna's RandomSampler(seed), with its fixed values."""
    import optuna

    from hpsearch.spec.loader import load_spec

    spec = load_spec(spec_path, [])
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(n):
        trial = study.ask()
        spec.tree.suggest(trial)
        study.tell(trial, 0.0)
        out.append({**spec.fixed, **spec.tree.config_from_params(trial.params)})
    return out


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def interleave(variants: dict[str, Callable[[int], dict[str, Any]]], repeats: int) -> dict[str, list[dict[str, Any]]]:
    """Run variant A, B, ..., A, B, ... `repeats` times; fn(repeat) -> measurements."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for r in range(repeats):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))  # neither always goes first
        for name in order:
            runs[name].append(variants[name](r))
            print(f"  repeat {r}: {name}: {_brief(runs[name][-1])}", flush=True)
    return runs


def _brief(m: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in m.items() if not isinstance(v, (list, dict)))


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


class Timer:
    def __enter__(self) -> Self:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.s = time.perf_counter() - self.start


def write_result(
    out: Path,
    name: str,
    title: str,
    *,
    headline: str,
    smoke: bool,
    goal: str,
    goal_met: bool | None,
    figures: dict[str, Any],
    table: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    started: float | None = None,
) -> Path:
    """`table` is {"columns": [...], "rows": [[...], ...]}; goal_met None means not measured."""
    result = {
        "name": name,
        "title": title,
        "headline": headline,  # one line for BENCHMARKS.md's summary table
        "command": command(),
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1) if started is not None else None,
        "machine": machine(),
        "smoke": smoke,
        "goal": goal,
        "goal_met": goal_met,
        "figures": figures,
        "table": table or {"columns": [], "rows": []},
        "notes": notes or [],
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=_jsonable) + "\n")
    print(f"wrote {path}")
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"
    return str(value)


# ---------------------------------------------------------------------------- the Fashion-MNIST task: searches, retrains, curves

WITHIN = 0.003  # "a best within 0.3 points" (val_acc is a share)


@dataclass(frozen=True)
class Setup:
    budget: int  # epochs per search
    epochs: int  # per trial, and for every retrain
    fixed: dict[str, Any]  # overrides of the spec's fixed: (smoke: tiny subsets)
    retrain: dict[str, Any]  # overrides for the retrain: the full train split, test images
    ray_trials: int  # Ray cannot stop on an epoch budget: this many trials, cut at the budget afterwards


def setup_for(smoke: bool, budget: int, epochs: int) -> Setup:
    if smoke:
        tiny = {"train_subset": 256, "val_subset": 200, "test_subset": 200, "epochs": 1}
        return Setup(2, 1, tiny, {"train_subset": 512, "val_subset": 200, "test_subset": 200}, 0)
    # ASHA (grace 2 epochs, rate 3, 6-epoch trials) spent 3.6-4.6 epochs a trial here; a spare trial or two, cut at the budget
    return Setup(
        budget, epochs, {"epochs": epochs}, {"train_subset": None, "val_subset": None, "test_subset": None}, math.ceil(budget / 3.3)
    )


@dataclass
class Trial:
    epochs: int  # reported epochs
    value: float | None  # final val_acc of a completed trial
    config: dict[str, Any] = field(default_factory=dict)


def spec_overrides(setup: Setup, seed: int, folder: Path, extra: list[str], trials: int | None = None) -> list[str]:
    """`trials` defaults to the budget: each trial runs at least an epoch, so the epoch budget ends the search first."""
    sets = [f"output={folder}", f"study=sq-{seed}", f"sampler.seed={seed}", f"fixed.seed={seed}", f"budget.trials={trials or setup.budget}"]
    sets += [f"fixed.{k}={json.dumps(v)}" for k, v in setup.fixed.items()]
    return sets + extra


class EpochCount:
    """The minimal reporter of a hand-written script: the objective calls report() once per epoch."""

    def __init__(self) -> None:
        self.epochs, self.val_acc = 0, []

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        self.epochs = epoch
        self.val_acc.append(metrics["val_acc"])


def retrain(setup: Setup, config: dict[str, Any], cache: Path | None) -> tuple[float, float]:
    """The best config on the full train split, `setup.epochs` epochs; test accuracy and seconds (0: from `cache`).

    Searches with the same seed share their first trials (TPE draws its start-up trials from
    RandomSampler(seed)), so they often pick the very same config; training is deterministic
    (CPU, one thread, seeded), so such a config is retrained once and its result reused."""
    from hpsearch.objectives.image_classification import train

    full = {**config, **setup.retrain, "epochs": setup.epochs, "evaluate_test": True}
    key = cache / (hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:16] + ".json") if cache else None
    if key is not None and key.is_file():
        return json.loads(key.read_text())["test_acc"], 0.0
    with Timer() as t:
        metrics = train(full, EpochCount())
    if key is not None:
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text(json.dumps({"test_acc": metrics["test_acc"], "config": full}))
    return metrics["test_acc"], t.s


def curve(trials: list[Trial]) -> list[tuple[int, float]]:
    """(cumulative epochs, best val_acc so far) after each trial that completed."""
    points, spent, best = [], 0, -math.inf
    for t in trials:
        spent += t.epochs
        if t.value is not None and math.isfinite(t.value) and t.value > best:
            best = t.value
            points.append((spent, best))
    return points


def epochs_to(points: list[tuple[int, float]], target: float) -> int | None:
    return next((e for e, v in points if v >= target - 1e-12), None)


def pct(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{100 * v:.2f}"


# ---------------------------------------------------------------------------- one config, a boolean objective key off and on

PAIR_COLUMNS = ["config", "what", "off s", "on s", "on / off", "val % off / on"]  # the table of pairs(), for either key


def pair_configs(spec_path: Path, n: int, seed: int, smoke: bool) -> list[dict[str, Any]]:
    tiny = {"train_subset": 256, "val_subset": 200, "epochs": 1} if smoke else {}
    return [{**config, **tiny, "seed": i} for i, config in enumerate(random_configs(spec_path, n, seed))]


def pairs(drawn: list[dict[str, Any]], group: str, key: str = "flush_denormal") -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """Each config trained with the boolean objective key ``key`` off and on, the order alternating per config."""
    per, rows = [], []
    for i, config in enumerate(drawn):
        order = (False, True) if i % 2 == 0 else (True, False)
        got = {value: train_with(config, key, value) for value in order}
        off, on = got[False], got[True]
        per.append({"group": group, "config": config, "off": off, "on": on})
        opt = config["optimizer"]
        knob = f"beta2 {config['beta2']:.3f}" if opt == "adamw" else f"momentum {config['momentum']:.2f}"
        rows.append(
            [
                f"{group} {i}",
                f"{opt}, lr {config['lr']:.2g}, {knob}, batch {config['batch_size']}",
                f"{off['s']:.2f}",
                f"{on['s']:.2f}",
                f"{ratio(on['s'], off['s']):.2f}",
                f"{100 * off['val_acc']:.2f} / {100 * on['val_acc']:.2f}",
            ]
        )
        print(f"  {rows[-1]}", flush=True)
    return per, rows


def pair_figures(per: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [ratio(x["on"]["s"], x["off"]["s"]) for x in per]
    total_off, total_on = sum(x["off"]["s"] for x in per), sum(x["on"]["s"] for x in per)
    return {
        "configs": len(per),
        "total_s_off": total_off,
        "total_s_on": total_on,
        "ratio_total_on_to_off": ratio(total_on, total_off),
        "median_ratio_on_to_off": median(ratios),
        "min_ratio_on_to_off": min(ratios),
        "max_ratio_on_to_off": max(ratios),
        "configs_sped_up_over_20_percent": sum(r < 0.8 for r in ratios),
    }


def train_with(config: dict[str, Any], key: str, value: bool) -> dict[str, float]:
    """One training of the built-in objective with ``key`` set to ``value``: seconds and the last val_acc."""
    from hpsearch.objectives.image_classification import train

    reporter = EpochCount()
    with Timer() as t:
        train({**config, key: value}, reporter)
    return {"s": t.s, "val_acc": reporter.val_acc[-1] if reporter.val_acc else float("nan")}


# ---------------------------------------------------------------------------- a hand-written Optuna script on the toy objective

TOY_EPOCHS = 3  # reports per trial
TOY_SPACE = """
space:
  lr: {float: [1.0e-4, 1.0], log: true}
  optimizer:
    choice:
      sgd: {momentum: {float: [0.5, 0.99]}}
      adamw: {beta1: {float: [0.8, 0.95]}}
"""
TOY_PRUNER = {"warmup_epochs": 1, "startup_trials": 5}  # hpsearch's defaults, spelled out for the Optuna script


def toy_objective(path: str) -> Callable[..., dict[str, float]]:
    """tests/fixtures/toy.py's objective, loaded by file path (no sys.path entry; also in a Ray worker)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("toy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.objective


def write_toy_spec(folder: Path, trials: int) -> Path:
    """The toy study as an hpsearch spec: the same space, sampler and pruner as run_optuna's script."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "orch.yaml"
    spec.write_text(
        f'study: orch\nobjective: "{TOY}:objective"\noutput: {folder / "runs"}\n'
        f"budget: {{trials: {trials}, max_failures: null}}\n"
        f"sampler: {{name: tpe, seed: 0}}\n"
        f"pruner: {{name: median, warmup_epochs: {TOY_PRUNER['warmup_epochs']}, startup_trials: {TOY_PRUNER['startup_trials']}}}\n"
        f"fixed: {{epochs: {TOY_EPOCHS}}}\n" + TOY_SPACE
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


def run_optuna(trials: int, wal: bool = False, callbacks: list | None = None) -> dict[str, Any]:
    """The toy study as a plain Optuna script (TPE, median pruner, SQLite): seconds and pruned trials."""
    import optuna

    toy = toy_objective(str(TOY))
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    def objective(trial: optuna.Trial) -> float:
        config = {"lr": trial.suggest_float("lr", 1e-4, 1.0, log=True), "epochs": TOY_EPOCHS}
        config["optimizer"] = trial.suggest_categorical("optimizer", ["sgd", "adamw"])
        if config["optimizer"] == "sgd":
            config["momentum"] = trial.suggest_float("optimizer.sgd.momentum", 0.5, 0.99)
        else:
            config["beta1"] = trial.suggest_float("optimizer.adamw.beta1", 0.8, 0.95)
        return toy(config, _OptunaReporter(trial))["val_acc"]

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


def in_child(script: str, variant: str, trials: int) -> dict[str, Any]:
    """`script --child VARIANT --trials N` in a fresh interpreter (hpsearch's SQLite settings are
    process-wide, and Ray leaves threads behind); the last JSON line it printed."""
    proc = subprocess.run(
        [sys.executable, script, "--child", variant, "--trials", str(trials)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=3600,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{variant} run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])
