"""Run one trial of an objective and say how it ended; never raise for the trial's own faults."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from hpsearch.objective import Objective
from hpsearch.reporter import Pruned, Reporter

COMPLETE, PRUNED, FAILED = "completed", "pruned", "failed"


@dataclass
class Outcome:
    state: str  # completed | pruned | failed
    reason: str  # "completed", "pruned at epoch 3", "diverged at epoch 2 (...)", "failed: ValueError: ..."
    metrics: dict[str, float] = field(default_factory=dict)
    values: list[float] | None = None  # the study's objective values, in metric order (completed only)
    epochs: int = 0
    wall_s: float = 0.0

    def attrs(self) -> dict[str, Any]:
        """What the storage keeps per trial besides params and intermediate values."""
        return {
            "reason": self.reason,
            "epochs": self.epochs,
            "wall_s": round(self.wall_s, 3),
            "metrics": {k: v for k, v in self.metrics.items() if _finite(v)},
            "samples_per_s": self.metrics.get("samples_per_s"),
            "peak_mem_mb": self.metrics.get("peak_mem_mb"),
        }


def run_trial(objective: Objective, config: dict[str, Any], reporter: Reporter, metric_names: list[str]) -> Outcome:
    """Call the objective; map pruning, divergence, missing metrics and exceptions to an Outcome.

    KeyboardInterrupt is recorded as "interrupted" and re-raised so the study stops.
    """
    start = time.perf_counter()
    try:
        result = objective(dict(config), reporter)
    except Pruned as exc:
        return _end(PRUNED, exc.reason, reporter, start)
    except KeyboardInterrupt:
        reporter.close()
        raise
    except Exception as exc:  # noqa: BLE001 - a trial's crash is recorded, never fatal to the study
        return _end(FAILED, f"failed: {type(exc).__name__}: {exc}".strip(), reporter, start)
    return _completed(result, reporter, metric_names, start)


def _completed(result: Any, reporter: Reporter, metric_names: list[str], start: float) -> Outcome:
    if not isinstance(result, dict):
        return _end(FAILED, f"failed: objective returned {type(result).__name__}, expected a dict of metrics", reporter, start)
    metrics = {k: float(v) for k, v in result.items() if isinstance(v, (int, float))}
    missing = [m for m in metric_names if m not in metrics]
    if missing:
        return _end(FAILED, f"failed: objective returned no {missing[0]!r} (it returned {sorted(result)})", reporter, start)
    values = [metrics[m] for m in metric_names]
    if not all(map(math.isfinite, values)):
        return _end(PRUNED, f"diverged at epoch {reporter.epochs} (final metric not finite)", reporter, start, metrics)
    outcome = _end(COMPLETE, COMPLETE, reporter, start, metrics)
    outcome.values = values
    return outcome


def _end(state: str, reason: str, reporter: Reporter, start: float, metrics: dict[str, float] | None = None) -> Outcome:
    if metrics is None:
        metrics = {k: v for k, v in (reporter.history[-1] if reporter.history else {}).items() if k != "epoch"}
    epochs = int(metrics.get("epochs", reporter.epochs)) if state == COMPLETE else reporter.epochs
    speeds = [h["samples_per_s"] for h in reporter.history if _finite(h.get("samples_per_s"))]
    if speeds and "samples_per_s" not in metrics:
        metrics = {**metrics, "samples_per_s": sum(speeds) / len(speeds)}
    return Outcome(state, reason, metrics, None, epochs, time.perf_counter() - start)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
