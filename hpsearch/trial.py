"""Run one trial of an objective and say how it ended; never raise for the trial's own faults."""

from __future__ import annotations

import gc
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from hpsearch.objective import Objective
from hpsearch.reporter import Pruned, Reporter
from hpsearch.text import finite

COMPLETE, PRUNED, FAILED = "completed", "pruned", "failed"
# Config key: the smallest micro-batch an out-of-memory retry may try (default 1). The leading
# underscore marks an engine setting that objectives ignore (the built-in one's validate() does).
MIN_BATCH_KEY = "_min_batch_size"


@dataclass
class Outcome:
    state: str  # completed | pruned | failed
    reason: str  # "completed", "pruned at epoch 3", "diverged at epoch 2 (...)", "failed: ValueError: ..."
    metrics: dict[str, float] = field(default_factory=dict)
    values: list[float] | None = None  # the study's objective values, in metric order (completed only)
    epochs: int = 0
    wall_s: float = 0.0
    config: dict[str, Any] | None = None  # the config of the last attempt (smaller micro-batch after out-of-memory)
    oom_retries: int = 0

    def attrs(self) -> dict[str, Any]:
        """What the storage keeps per trial besides params and intermediate values."""
        attrs = {
            "reason": self.reason,
            "epochs": self.epochs,
            "wall_s": round(self.wall_s, 3),
            "metrics": {k: v for k, v in self.metrics.items() if finite(v)},
            "samples_per_s": self.metrics.get("samples_per_s"),
            "peak_mem_mb": self.metrics.get("peak_mem_mb"),
        }
        if self.oom_retries:
            attrs.update(oom_retries=self.oom_retries, config=self.config)
        return attrs


def run_trial(objective: Objective, config: dict[str, Any], reporter: Reporter, metric_names: list[str]) -> Outcome:
    """Call the objective; map pruning, divergence, missing metrics and exceptions to an Outcome.

    Out of memory (CUDA/MPS) with an integer ``batch_size``: run again with the micro-batch
    split (halved when even) and ``accum_steps`` multiplied to match, so the effective batch
    stays the same, down to config ``_min_batch_size`` (default 1); then fail.
    KeyboardInterrupt is recorded as "interrupted" and re-raised so the study stops.
    """
    start = time.perf_counter()
    config, retries = dict(config), 0
    while True:
        outcome = _attempt(objective, config, reporter, metric_names, start)
        if outcome is None:  # out of memory
            smaller = split_micro_batch(config)
            if smaller is not None:
                config, retries = smaller, retries + 1
                _free_memory()
                _reset(reporter)
                continue
            again = f" (after {retries} retries with smaller micro-batches)" if retries else ""
            outcome = _end(FAILED, f"failed: out of memory at micro-batch {config['batch_size']}{again}", reporter, start)
        outcome.config, outcome.oom_retries = config, retries
        return outcome


def _attempt(objective: Objective, config: dict[str, Any], reporter: Reporter, metric_names: list[str], start: float) -> Outcome | None:
    """One call of the objective; None when it ran out of memory and a smaller micro-batch may help."""
    try:
        result = objective(dict(config), reporter)
    except Pruned as exc:
        return _end(PRUNED, exc.reason, reporter, start)
    except KeyboardInterrupt:
        reporter.close()
        raise
    except Exception as exc:  # noqa: BLE001 - a trial's crash is recorded, never fatal to the study
        if is_out_of_memory(exc) and _micro_batch(config) is not None:
            return None  # leaving the handler drops the traceback and the tensors its frames hold
        return _end(FAILED, f"failed: {type(exc).__name__}: {exc}".strip(), reporter, start)
    return _completed(result, reporter, metric_names, start)


def is_out_of_memory(exc: BaseException) -> bool:
    torch = sys.modules.get("torch")  # an objective that raises it has imported torch
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def _micro_batch(config: dict[str, Any]) -> int | None:
    value = config.get("batch_size")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def split_micro_batch(config: dict[str, Any]) -> dict[str, Any] | None:
    """batch_size / f and accum_steps * f for the smallest factor f of batch_size (2 when even): same samples per step."""
    batch, floor = _micro_batch(config), config.get(MIN_BATCH_KEY, 1)
    floor = floor if isinstance(floor, int) and floor >= 1 else 1
    if batch is None or batch < 2:
        return None
    factor = next(f for f in range(2, batch + 1) if batch % f == 0)
    if batch // factor < floor:
        return None
    accum = config.get("accum_steps", 1)
    return {**config, "batch_size": batch // factor, "accum_steps": (accum if isinstance(accum, int) else 1) * factor}


def _free_memory() -> None:
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _reset(reporter: Reporter) -> None:
    """A fresh run for the retry: no history, no TensorBoard events from the attempt that ran out of memory.

    With a checkpoint (``hpsearch train``) the objective resumes from it, so the run so far is kept.
    """
    if reporter.checkpoint_path is not None and reporter.checkpoint_path.exists():
        return
    reporter.close()
    reporter.history.clear()
    if reporter.trial_dir is not None and reporter.trial_dir.is_dir():
        for events in reporter.trial_dir.glob("events.out.tfevents.*"):
            events.unlink()


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
    speeds = [h["samples_per_s"] for h in reporter.history if finite(h.get("samples_per_s"))]
    if speeds and "samples_per_s" not in metrics:
        metrics = {**metrics, "samples_per_s": sum(speeds) / len(speeds)}
    return Outcome(state, reason, metrics, None, epochs, time.perf_counter() - start)
