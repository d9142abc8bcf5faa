"""Run one trial of an objective and say how it ended; never raise for the trial's own faults."""

from __future__ import annotations

import gc
import math
import os
import sys
import sysconfig
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from hpsearch.base.text import as_metric, finite
from hpsearch.trial.objective import Objective
from hpsearch.trial.reporter import ContractError, Pruned, Reporter

COMPLETE, PRUNED, FAILED = "completed", "pruned", "failed"
# Config key: the smallest micro-batch an out-of-memory retry may try (default 1). The leading
# underscore marks an engine setting that objectives ignore (the built-in one's validate() does).
MIN_BATCH_KEY = "_min_batch_size"
ERROR_FILE = "error.txt"  # the full traceback of a trial that raised, in its trial folder
TRACEBACK_CHARS = 20_000  # the user attribute keeps the end (the innermost frames); the file keeps it all
REASON_CHARS = 300  # a reason is one line in tables and progress; the whole text is in ERROR_FILE


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
    traceback: str | None = None  # the objective raised: the full traceback
    error_at: str | None = None  # the innermost frame of the user's code that raised (file:line)
    contract: bool = False  # objective and spec disagree (no metric of the spec's): every trial would fail alike

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
        if self.traceback is not None:
            attrs.update(traceback=self.traceback[-TRACEBACK_CHARS:], error_at=self.error_at)
        if self.contract:
            attrs["contract_error"] = True
        return attrs


def run_trial(objective: Objective, config: dict[str, Any], reporter: Reporter, metric_names: list[str]) -> Outcome:
    """Call the objective; map pruning, divergence, missing metrics and exceptions to an Outcome.

    Out of memory (CUDA/MPS) with an integer ``batch_size``, for an objective that declares
    ``fn.accum_steps = True`` (it honours ``config["accum_steps"]``, as the built-in one does): run
    again with the micro-batch split (halved when even) and ``accum_steps`` multiplied to match, so
    the effective batch stays the same, down to config ``_min_batch_size`` (default 1); then fail.
    Any other objective fails at once with a one-line reason saying what to do.
    After the first report, config keys the objective never read are named in one warning line.
    KeyboardInterrupt is recorded as "interrupted" and re-raised so the study stops.
    """
    start = time.perf_counter()
    from hpsearch.trial.ranks import launcher, world_size

    if world_size(config) > 1:  # config processes: N runs the objective as N torch.distributed ranks
        honours = getattr(objective, "accum_steps", False)
        objective = launcher(objective, world_size(config))
        if honours:
            objective.accum_steps = True  # type: ignore[attr-defined]
    on_epoch = reporter.on_epoch
    reporter.metric_names = list(metric_names)
    reads = ReadKeys()
    reporter.on_epoch = _first_report_checked(reporter, metric_names, on_epoch, reads)
    try:
        outcome = _attempts(objective, dict(config), reporter, metric_names, start, reads)
    finally:
        reporter.on_epoch = on_epoch
    if outcome.traceback is not None and reporter.trial_dir is not None:
        reporter.trial_dir.mkdir(parents=True, exist_ok=True)
        (reporter.trial_dir / ERROR_FILE).write_text(outcome.traceback, encoding="utf-8")
    return outcome


def _attempts(
    objective: Objective, config: dict[str, Any], reporter: Reporter, metric_names: list[str], start: float, reads: ReadKeys
) -> Outcome:
    retries = 0
    while True:
        outcome = _attempt(objective, config, reporter, metric_names, start, reads)
        if outcome is None:  # out of memory
            smaller = split_micro_batch(config)
            if smaller is not None:
                print(
                    f"trial: out of memory at batch_size={config['batch_size']}: retrying with batch_size={smaller['batch_size']} "
                    f"accum_steps={smaller['accum_steps']} (same samples per optimizer step)",
                    file=sys.stderr,
                    flush=True,
                )
                config, retries = smaller, retries + 1
                _free_memory()
                _reset(reporter)
                continue
            again = f" (after {retries} retries with smaller micro-batches)" if retries else ""
            outcome = _end(FAILED, f"failed: out of memory at micro-batch {config['batch_size']}{again}", reporter, start)
        outcome.config, outcome.oom_retries = config, retries
        return outcome


def _attempt(
    objective: Objective, config: dict[str, Any], reporter: Reporter, metric_names: list[str], start: float, reads: ReadKeys
) -> Outcome | None:
    """One call of the objective; None when it ran out of memory and a smaller micro-batch may help."""
    try:
        result = objective(reads.watch(config), reporter)
    except Pruned as exc:
        return _end(PRUNED, exc.reason, reporter, start)
    except KeyboardInterrupt:
        reporter.close()
        raise
    except ContractError as exc:
        return _contract(str(exc), reporter, start)
    except Exception as exc:  # noqa: BLE001 - a trial's crash is recorded, never fatal to the study
        if is_out_of_memory(exc):
            if _micro_batch(config) is not None and getattr(objective, "accum_steps", False):
                return None  # leaving the handler drops the traceback and the tensors its frames hold
            text = f"failed: out of memory{_at_batch(config)}: {OOM_ADVICE}"
        else:
            text = f"failed: {type(exc).__name__}: {exc}"
        outcome = _end(FAILED, one_line(text), reporter, start)
        details = getattr(exc, "details", None)  # a command's exit status and last stderr lines
        outcome.traceback = details if isinstance(details, str) else traceback.format_exc()
        outcome.error_at = user_frame(exc.__traceback__, getattr(exc, "frames", None))
        return outcome
    return _completed(result, reporter, metric_names, start)


OOM_ADVICE = (
    "lower batch_size (or the model's size) in the spec, or let hpsearch retry with smaller micro-batches: "
    "honour config['accum_steps'] (gradient accumulation) and set fn.accum_steps = True on the objective"
)


def _at_batch(config: dict[str, Any]) -> str:
    return f" at batch_size={config['batch_size']}" if _micro_batch(config) is not None else ""


class ReadKeys:
    """Which config keys the objective read, to name the others (a typo, a parameter nothing uses)."""

    def __init__(self) -> None:
        self.config: Recording | None = None
        self.warned = False

    def watch(self, config: dict[str, Any]) -> dict[str, Any]:
        self.config = Recording(config)
        return self.config

    def unread(self) -> list[str]:
        if self.config is None or getattr(self.config, "opaque", False):
            return []
        return sorted(k for k in self.config if not k.startswith("_") and k not in self.config.read)

    def warn_once(self) -> None:
        unread = [] if self.warned else self.unread()
        self.warned = True
        if unread:
            print(
                f"trial: the objective never read config key(s) {', '.join(unread)} (a typo in the spec, or a parameter it ignores)",
                file=sys.stderr,
                flush=True,
            )


class Recording(dict[str, Any]):
    """A config dict that records the keys read. Copying it (``dict(config)``, ``**config``,
    iteration) reads every key: such an objective is not judged (``opaque``)."""

    def __init__(self, data: dict[str, Any]):
        super().__init__(data)
        self.read: set[str] = set()
        self.opaque = False

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.read.add(key)
        return super().pop(key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().setdefault(key, default)

    def __iter__(self) -> Any:
        self.opaque = True
        return super().__iter__()

    def items(self) -> Any:
        self.opaque = True
        return super().items()

    def values(self) -> Any:
        self.opaque = True
        return super().values()

    def copy(self) -> dict[str, Any]:
        self.opaque = True
        return dict(super().items())


def _first_report_checked(reporter: Reporter, metric_names: list[str], then: Any, reads: ReadKeys | None = None) -> Any:
    """An epoch hook that fails the trial at its first report when the report has none of the spec's
    metrics (pruning and the curves need it); with several metrics, one of them is enough here
    (the others may come only with the returned dict, which is checked for all). After the first
    report it names config keys the objective never read."""

    def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
        if len(reporter.history) == 1 and not any(m in metrics for m in metric_names):
            raise ContractError(
                f"the first report (epoch {epoch}) has no {_names(metric_names)} (the spec's metric:); it reported {sorted(metrics)}"
            )
        if reads is not None and len(reporter.history) == 1:
            reads.warn_once()
        if then is not None:
            then(epoch, metrics)

    return on_epoch


def _names(metric_names: list[str]) -> str:
    return repr(metric_names[0]) if len(metric_names) == 1 else f"metric of {metric_names}"


def _contract(text: str, reporter: Reporter, start: float) -> Outcome:
    outcome = _end(FAILED, f"failed: {text}", reporter, start)
    outcome.contract = True
    return outcome


def one_line(text: str, limit: int = REASON_CHARS) -> str:
    """An error message as one line (tables, progress lines): whitespace runs become one space."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def user_frame(tb: TracebackType | None, frames: list[traceback.FrameSummary] | None = None) -> str | None:
    """``file:line`` of the innermost frame outside the Python library, installed packages and the
    engine (hpsearch/**; hpsearch/parts/ is training code and counts as the user's).
    ``frames``: where an exception raised in another process came from (a data-parallel rank's)."""
    if frames is None:
        frames = traceback.extract_tb(tb)[1:]  # [0] is run_trial's own call of the objective
    if not frames:
        return None
    library = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")})
    engine = os.path.realpath(Path(__file__).parents[1]) + os.sep
    parts = engine + "parts" + os.sep

    def users(filename: str) -> bool:
        real = os.path.realpath(filename)
        if filename.startswith("<") or real.startswith(library):
            return False
        return not real.startswith(engine) or real.startswith(parts)  # hpsearch/parts/x.py is the user's side

    frame = next((f for f in reversed(frames) if users(f.filename)), frames[-1])
    return f"{os.path.abspath(frame.filename)}:{frame.lineno}"  # absolute: read back from any folder


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
        return _contract(f"objective returned {type(result).__name__}, expected a dict of metrics", reporter, start)
    metrics = {k: n for k, v in result.items() if (n := as_metric(v)) is not None}
    missing = [m for m in metric_names if m not in metrics]
    if missing:
        name = missing[0]
        if name in result:
            kind = type(result[name]).__name__
            return _contract(f"objective returned {name!r} as a {kind}, not a number (the spec's metric: needs one)", reporter, start)
        return _contract(f"objective returned no {name!r} (the spec's metric:); it returned {sorted(result)}", reporter, start)
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
