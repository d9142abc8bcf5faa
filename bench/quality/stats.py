"""Statistics over traces: any-time regret, expected running time to a target, paired tests.

Normalised regret: 0 at the task's optimum, 1 at the median random config (a search whose
incumbent is worse than the median random config has regret above 1; before its first
completed trial, a search's regret counts as 1). ERT (expected running time) to a target:
the epochs of all runs, successful or not, divided by the number that reached the target
(Auger and Hansen's definition); the speed-up of a method over random search is random's ERT
over the method's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.quality.methods import Trace


def regret(value: float, ref: tuple[float, float], direction: str) -> float:
    optimum, median = ref
    if not math.isfinite(value):
        return 1.0
    gap = (optimum - value) if direction == "maximize" else (value - optimum)
    scale = abs(optimum - median) or 1.0
    return max(0.0, gap / scale)


def regret_at(trace: Trace, epochs: int, ref: tuple[float, float], direction: str) -> float:
    """The regret of the incumbent after ``epochs`` epochs (the last finished trial by then)."""
    value = math.nan
    for spent, inc in zip(trace.spent, trace.incumbent, strict=True):
        if spent > epochs:
            break
        value = inc
    return regret(value, ref, direction)


def pruned_at(trace: Trace, epochs: int) -> int:
    """Epochs spent in pruned trials by the time ``epochs`` were spent (a run read at a smaller
    budget than it ran to)."""
    done = [p for s, p in zip(trace.spent, trace.pruned, strict=True) if s <= epochs]
    return done[-1] if done else 0


def epochs_to(trace: Trace, target: float, ref: tuple[float, float], direction: str) -> int | None:
    """Epochs at which the incumbent's regret first drops to ``target`` (None: never)."""
    for spent, inc in zip(trace.spent, trace.incumbent, strict=True):
        if regret(inc, ref, direction) <= target:
            return spent
    return None


def ert(traces: list[Trace], target: float, budget: int, ref: tuple[float, float], direction: str) -> float:
    """Expected running time to ``target``: all runs' epochs (successes until they hit, failures
    their whole budget) over the number of successes; inf when none succeeded."""
    hits = [epochs_to(t, target, ref, direction) for t in traces]
    hits = [h if h is not None and h <= budget else None for h in hits]
    successes = sum(h is not None for h in hits)
    total = sum(h if h is not None else budget for h in hits)
    return total / successes if successes else math.inf


def bootstrap_median_band(values: np.ndarray, rng: np.random.Generator, n: int = 1000) -> tuple[float, float]:
    """95 % percentile-bootstrap band of the median of ``values`` (1-D)."""
    idx = rng.integers(0, len(values), size=(n, len(values)))
    medians = np.median(values[idx], axis=1)
    return float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def paired(a: list[float], b: list[float]) -> dict[str, Any]:
    """a vs b per seed (lower is better): share where a wins (ties split), Wilcoxon p (two-sided)."""
    from scipy.stats import wilcoxon

    x, y = np.asarray(a), np.asarray(b)
    wins = float(np.mean(x < y) + 0.5 * np.mean(x == y))
    diff = x - y
    p = 1.0 if not np.any(diff != 0) else float(wilcoxon(x, y, zero_method="zsplit").pvalue)
    return {"win_rate": wins, "wilcoxon_p": p, "n": len(x), "median_diff": float(np.median(diff))}
