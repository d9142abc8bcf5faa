"""The objective's window on the world: per-epoch metrics to TensorBoard and to the backend.

``reporter.report(epoch, metrics)`` writes TensorBoard scalars, hands the metrics to the
backend's pruning hook, and raises ``Pruned`` when the backend says stop or ``Diverged``
when a metric is NaN/inf. The objective only lets these propagate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from hpsearch.base.text import as_metric, finite

# metric name -> TensorBoard tag; other metrics go under "metrics/<name>".
TAGS = {
    "train_loss": "train/loss",
    "val_loss": "val/loss",
    "val_acc": "val/acc",
    "lr": "train/lr",
    "samples_per_s": "perf/samples_per_s",
    "epoch_time_s": "perf/epoch_time_s",
    "peak_mem_mb": "perf/peak_mem_mb",
}

PruneHook = Callable[[int, dict[str, float]], bool]
EpochHook = Callable[[int, dict[str, float]], None]
ResumeHook = Callable[[int, list[dict[str, float]]], None]  # (last epoch in the checkpoint, its per-epoch history)
META = "hpsearch"  # a checkpoint file is {META: {"epoch", "history"}, "state": the objective's state}


class Pruned(Exception):
    """The backend stopped the trial early (it was clearly worse)."""

    def __init__(self, epoch: int, reason: str | None = None):
        self.epoch = epoch
        self.reason = reason or f"pruned at epoch {epoch}"
        super().__init__(self.reason)


class Diverged(Pruned):
    """A metric became NaN or infinite; training further is pointless."""

    def __init__(self, epoch: int, metric: str):
        super().__init__(epoch, f"diverged at epoch {epoch} ({metric} not finite)")


class ContractError(Exception):
    """The objective does not report the spec's metric: a bug in the objective or the spec, not bad luck."""


def tag_for(name: str) -> str:
    return TAGS.get(name, f"metrics/{name}")


class ScriptReporter(Protocol):
    """What a script run as a command needs of its reporter (``Reporter`` has it): where the
    trial's files go, the checkpoint to hand over, and the per-epoch report."""

    trial_dir: Path | None
    checkpoint_path: Path | None
    resume_from: Path | None

    def report(self, epoch: int, metrics: dict[str, float]) -> None: ...


class Reporter:
    """One trial's reporter. ``prune_hook(epoch, metrics) -> True`` means prune now."""

    def __init__(
        self,
        trial_dir: Path | None = None,
        prune_hook: PruneHook | None = None,
        on_epoch: EpochHook | None = None,
        checkpoint_path: Path | None = None,
        resume_from: Path | None = None,
        on_resume: ResumeHook | None = None,
    ):
        """``checkpoint_path``: where save_checkpoint writes and load_checkpoint reads first.
        ``resume_from``: another trial's checkpoint (a dead trial's) to start from when there is
        none of our own; its per-epoch history becomes this trial's (TensorBoard too), and
        ``on_resume`` is told, so the backend can record the earlier epochs for its pruner."""
        self.trial_dir = trial_dir
        self.prune_hook = prune_hook
        self.on_epoch = on_epoch
        self.checkpoint_path = checkpoint_path
        self.resume_from = resume_from
        self.on_resume = on_resume
        self.resumed_epoch: int | None = None  # set once a resume_from checkpoint was loaded
        self.metric_names: list[str] = []  # the spec's metrics (run_trial sets them): a script's output is read for them
        self.history: list[dict[str, float]] = []
        self._writer: Any = None

    @property
    def epochs(self) -> int:
        return int(self.history[-1]["epoch"]) if self.history else 0

    @property
    def writer(self) -> Any:
        if self._writer is None and self.trial_dir is not None:
            from hpsearch.trial.tblog import EventWriter

            self._writer = EventWriter(self.trial_dir)
        return self._writer

    def report(self, epoch: int, metrics: dict[str, Any]) -> None:
        """``metrics``: numbers, 0-d tensors or NumPy scalars (read once, as floats)."""
        numbers = {k: as_metric(v) for k, v in metrics.items()}
        bad_type = next((k for k, v in numbers.items() if v is None), None)
        if bad_type is not None:
            raise TypeError(f"reporter.report: metric {bad_type!r} is a {type(metrics[bad_type]).__name__}, not a number")
        metrics = {k: v for k, v in numbers.items() if v is not None}
        if self.history and self.history[-1]["epoch"] >= epoch:  # an epoch again after a resume: the new one counts
            self.history = [h for h in self.history if h["epoch"] < epoch]
        self.history.append({"epoch": epoch, **metrics})
        if self.writer is not None:
            for name, value in metrics.items():
                self.writer.add_scalar(tag_for(name), value, epoch)
            self.writer.flush()
        if self.on_epoch is not None:
            self.on_epoch(epoch, metrics)
        bad = next((k for k, v in metrics.items() if not math.isfinite(v)), None)
        if bad is not None:
            raise Diverged(epoch, bad)
        if self.prune_hook is not None and self.prune_hook(epoch, metrics):
            raise Pruned(epoch)

    def load_checkpoint(self) -> dict[str, Any] | None:
        """Our own checkpoint (a restart of this run), else ``resume_from`` (a dead trial's), else None."""
        own = self.checkpoint_path is not None and self.checkpoint_path.exists()
        path = self.checkpoint_path if own else self.resume_from
        if path is None or not path.exists():
            return None
        import torch

        loaded: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
        if META not in loaded or "state" not in loaded:
            return loaded  # written by an older hpsearch: the objective's state alone
        meta, state = loaded[META], loaded["state"]
        if not own:
            self._continue(int(meta["epoch"]), [h for h in meta["history"] if h["epoch"] <= meta["epoch"]])
        elif not self.history:
            self.history = list(meta["history"])
        return dict(state)

    def _continue(self, epoch: int, history: list[dict[str, float]]) -> None:
        """Take over a dead trial's epochs: its history, its TensorBoard curve (no step twice), the backend's record."""
        self.history, self.resumed_epoch = list(history), epoch
        if self.writer is not None:
            for row in history:
                for name, value in row.items():
                    if name != "epoch":
                        self.writer.add_scalar(tag_for(name), value, int(row["epoch"]))
            self.writer.flush()
        if self.on_resume is not None:
            self.on_resume(epoch, self.history)

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Keep the objective's state with the epochs reported so far, in one file written atomically."""
        if self.checkpoint_path is None:
            return
        import torch

        self.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename: a kill mid-write leaves the previous checkpoint intact.
        tmp = self.checkpoint_path.with_suffix(".tmp")
        torch.save({META: {"epoch": self.epochs, "history": self.history}, "state": state}, tmp)
        tmp.replace(self.checkpoint_path)

    def close(self, hparams: dict[str, Any] | None = None, final: dict[str, float] | None = None) -> None:
        """Write the trial's hyperparameters and final metrics to TensorBoard's HParams view."""
        if self.writer is not None and hparams is not None:
            final = {f"final/{k}": float(v) for k, v in (final or {}).items() if finite(v)}
            self.writer.add_hparams(hparams, final, self.epochs)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
