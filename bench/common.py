"""Shared by the bench scripts: the result file and the machine it was measured on, interleaved
timing, hpsearch as a user runs it. Standard library only at import: bench.tier_b_table runs
where hpsearch is not installed.

Each script writes bench/results/<name>.json (committed; the keys are write_result's), and
bench.run_all renders BENCHMARKS.md from those files only, so every figure there has a
rerunnable source. Timings on a shared machine are noisy, so figures are ratios of variants
measured side by side in one run (A, B, B, A, ...) and the median of each.
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
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TOY = ROOT / "tests" / "fixtures" / "toy.py"  # a trivial objective: no torch, microseconds per epoch
TOY_SETS = [f"objective={TOY}:objective", "metric=val_acc", "direction=maximize"]  # --set: a search of the toy (smoke runs)


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
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor() or "unknown")


def machine() -> dict[str, Any]:
    """What a reader needs to judge a figure: cores, CPU, GPU, library versions, load."""
    torch = sys.modules.get("torch")
    gpu = torch.cuda.get_device_name(0) if torch is not None and torch.cuda.is_available() else None
    found = {"nproc": os.cpu_count(), "cpu": cpu_model(), "gpu": gpu, "python": platform.python_version()}
    # the load: other jobs on the machine; ratios, not absolutes, are the figures
    return found | {p: _version(p) for p in ("torch", "optuna", "ray")} | {"load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()]}


def command(module: str) -> str:
    """``python -m MODULE ARGS`` as typed from the checkout's root (path arguments made relative to it)."""

    def typed(arg: str) -> str:
        path = Path(arg).resolve()
        return str(path.relative_to(ROOT)) if not arg.startswith("-") and path.exists() and path.is_relative_to(ROOT) else arg

    return " ".join([".venv/bin/python -m", module, *(shlex.quote(typed(a)) for a in sys.argv[1:])])


def started_as(module: str, argv: list[str] | None) -> str:
    """``python -m MODULE ARGS`` as this run was started (ARGS: ``argv``, else the command line's)."""
    return " ".join([f"python -m {module}", *(sys.argv[1:] if argv is None else argv)])


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def interleave(variants: Mapping[str, Callable[..., dict[str, Any]]], repeats: int) -> dict[str, list[dict[str, Any]]]:
    """Run variant A, B, ..., then ..., B, A: `repeats` rounds; fn(repeat) -> measurements."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for r in range(repeats):
        for name in list(variants) if r % 2 == 0 else list(variants)[::-1]:  # neither always goes first
            got = variants[name](r)
            runs[name].append(got)
            brief = (f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in got.items() if not isinstance(v, list | dict))
            print(f"  repeat {r}: {name}: {', '.join(brief)}", flush=True)
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
    """ARGS.out/NAME.json of the script bench.NAME (ARGS: its parser()'s); `headline` is one line for
    BENCHMARKS.md's status table, `table` {"columns": [...], "rows": [[...], ...]}; goal_met None:
    no target, or a --smoke run (never measured)."""
    now = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    result: dict[str, Any] = {"name": name, "title": title, "headline": headline, "command": command(f"bench.{name}"), "date": now}
    result |= {"duration_s": round(time.perf_counter() - args.started, 1), "machine": machine(), "smoke": args.smoke, "goal": goal}
    result |= {"goal_met": None if args.smoke else goal_met, "figures": figures}
    result |= {"table": table or {"columns": [], "rows": []}, "notes": notes or []}
    args.out.mkdir(parents=True, exist_ok=True)
    path: Path = args.out / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v)) + "\n")
    print(f"wrote {path}")
    return path
