"""Shared by every bench script: machine description, interleaved timing, JSON results.

Each script writes bench/results/<name>.json (committed) with the keys below; run_all.py
renders BENCHMARKS.md from those files only, so every figure there has a rerunnable source.

    name, title, headline, command, date, duration_s, machine, smoke, goal, goal_met, figures, table, notes

Timings on a shared machine are noisy, so figures are ratios of variants measured side by
side in one run: A, B, A, B, ... and the median of each.
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
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TOY = ROOT / "tests" / "fixtures" / "toy.py"

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
