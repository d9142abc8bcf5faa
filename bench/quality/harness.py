"""Run (task, method, seed) searches in a process pool and summarise them per budget.

One search per (task, method, seed) runs at the largest budget and is read at every smaller
budget on the way (a method's first 72 epochs do not depend on whether it may go on to 288),
except for methods that plan with the budget (a registry entry's ``plan``: hpsearch's defaults),
which run once per distinct plan: budgets whose settings resolve the same (72 and 144 epochs both
give 3 start-up trials) share the run at the larger one. Results are plain dicts, ready for JSON.
"""

from __future__ import annotations

import functools
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from typing import Any

import numpy as np

from bench.quality import stats
from bench.quality.methods import Trace
from bench.quality.registry import METHODS, make_task
from bench.quality.tasks import Task


@functools.cache  # one per process: a task's reference and surrogate are built once
def _task(name: str) -> Task:
    return make_task(name)


def _one(job: tuple[str, str, int, int]) -> tuple[tuple[str, str, int, int], dict[str, Any]]:
    task_name, method, budget, seed = job
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    started = time.process_time()
    trace = METHODS[method].run(_task(task_name), budget, seed)
    trace.cpu_s = time.process_time() - started
    return job, asdict(trace)


@functools.cache  # summarise asks once per seed and epoch
def plan(method: str, task: str, budget: int) -> Any:
    """What a budget-aware method sets from ``budget`` (its registry entry's ``plan``)."""
    entry = METHODS[method]
    assert entry.plan is not None
    return entry.plan(_task(task), budget)


def run_budget(task: str, method: str, budget: int, budgets: list[int]) -> int:
    """The budget of the search that is read at ``budget``: the largest of ``budgets`` with the
    same plan (every budget the largest one, for methods that do not plan with it)."""
    if METHODS[method].plan is None:
        return max(budgets)
    mine = plan(method, task, budget)
    return max(b for b in budgets if b >= budget and plan(method, task, b) == mine)


def jobs_for(tasks: list[str], methods: list[str], budgets: list[int], seeds: range) -> list[tuple[str, str, int, int]]:
    jobs = []
    for task in tasks:
        for method in methods:
            for budget in sorted({run_budget(task, method, b, budgets) for b in budgets}):
                jobs += [(task, method, budget, seed) for seed in seeds]
    return jobs


def run(tasks: list[str], methods: list[str], budgets: list[int], seeds: range, jobs: int) -> dict[Any, Trace]:
    """Every search; key (task, method, budget it ran at, seed) -> Trace."""
    todo = jobs_for(tasks, methods, budgets, seeds)
    for name in tasks:  # references once, in the parent (random draws: a few seconds per task)
        _task(name).reference()
    out: dict[Any, Trace] = {}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        for i, (job, trace) in enumerate(pool.map(_one, todo, chunksize=4), start=1):
            out[job] = Trace(**trace)
            if i % max(1, len(todo) // 20) == 0 or i == len(todo):
                print(f"  {i}/{len(todo)} searches, {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def trace_for(traces: dict[Any, Trace], task: str, method: str, budget: int, seed: int, budgets: list[int]) -> Trace:
    return traces[(task, method, run_budget(task, method, budget, budgets), seed)]


def summarise(traces: dict[Any, Trace], tasks: list[str], methods: list[str], budgets: list[int], seeds: range) -> dict[str, Any]:
    """Per task, budget and method: median regret with its 95 % band, ERT speed-ups over random
    to random's final median (and its final 25th percentile), paired wins against Optuna's
    defaults, epochs in pruned trials and sampler seconds per trial."""
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {}
    for task_name in tasks:
        task = _task(task_name)
        ref, direction = task.reference(), task.direction
        per_budget: dict[str, Any] = {}
        for budget in budgets:
            runs = {m: [trace_for(traces, task_name, m, budget, s, budgets) for s in seeds] for m in methods}
            regrets = {m: np.array([stats.regret_at(t, budget, ref, direction) for t in ts]) for m, ts in runs.items()}
            targets = {}
            if "random" in methods:
                targets = {"random_median": float(np.median(regrets["random"])), "random_p25": float(np.percentile(regrets["random"], 25))}
            rows: dict[str, Any] = {}
            for method, ts in runs.items():
                mine = regrets[method]
                row: dict[str, Any] = {
                    "median_regret": float(np.median(mine)),
                    "median_regret_band": stats.bootstrap_median_band(mine, rng),
                    "pruned_epoch_share": float(np.mean([stats.pruned_at(t, budget) / budget for t in ts])),
                    "sampler_s_per_trial": float(np.mean([t.sampler_s / max(1, t.trials) for t in ts])),
                    "trials": float(np.mean([t.trials for t in ts])),
                    "regrets": [round(float(r), 5) for r in mine],  # per seed, in --seeds order: paired tests across tasks
                }
                if "random" in methods:  # a bad search: worse than half of all random searches
                    row["bad_search_share"] = float(np.mean(mine > np.median(regrets["random"])))
                for label, target in targets.items():
                    ert, base = (stats.ert(runs[m], target, budget, ref, direction) for m in (method, "random"))
                    row[f"ert_{label}"] = ert
                    row[f"ert_speedup_vs_random_{label}"] = base / ert if math.isfinite(ert) and ert > 0 else 0.0
                row["ert_speedup_vs_random"] = row.get("ert_speedup_vs_random_random_median")
                if "optuna_default" in methods and method != "optuna_default":
                    p = stats.paired(list(mine), list(regrets["optuna_default"]))
                    row["win_rate_vs_optuna_default"], row["wilcoxon_p"] = p["win_rate"], p["wilcoxon_p"]
                    row["median_regret_diff_vs_optuna_default"] = p["median_diff"]
                rows[method] = row
            per_budget[str(budget)] = {"targets": targets, "methods": rows}
        result[task_name] = {"direction": direction, "reference": {"optimum": ref[0], "random_median": ref[1]}, "budgets": per_budget}
    return result


def anytime(traces: dict[Any, Trace], task: str, method: str, budget: int, seeds: range, budgets: list[int]) -> dict[str, list[float]]:
    """Median regret and its 95 % band at every epoch 1..budget (for the plot)."""
    t = _task(task)
    ref, direction = t.reference(), t.direction
    rng = np.random.default_rng(1)
    grid = list(range(1, budget + 1))
    matrix = np.array(
        [[stats.regret_at(trace_for(traces, task, method, budget, s, budgets), e, ref, direction) for e in grid] for s in seeds]
    )
    med = np.median(matrix, axis=0)
    bands = [stats.bootstrap_median_band(matrix[:, i], rng, n=300) for i in range(len(grid))]
    return {"epochs": grid, "median": med.tolist(), "low": [b[0] for b in bands], "high": [b[1] for b in bands]}
