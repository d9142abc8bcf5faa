"""Early stopping on a validation metric: config ``early_stopping: {patience: P, min_delta: D, monitor: M}``.

Training stops after ``patience`` epochs in a row without an improvement of more than
``min_delta`` over the best value so far. The best epoch's weights are kept (a CPU copy,
one model's size of host memory) so the run can end on them. The state is plain tensors,
numbers and dicts, so it rides in the objective's checkpoint and a resumed run continues
the count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

# monitor -> mode: accuracies improve upwards, losses downwards.
MONITORS = {"val_acc": "max", "val_loss": "min"}
KEYS = ("patience", "min_delta", "monitor")


def early_stopping_problems(value: Any) -> list[str]:
    """One line per problem with the ``early_stopping`` config value (None = off)."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [f"early_stopping must be a mapping like {{patience: 3, min_delta: 0.001}} or null, got {value!r}"]
    problems = [f"early_stopping: unknown key {k!r}; the keys are {', '.join(KEYS)}" for k in value if k not in KEYS]
    patience = value.get("patience")
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
        problems.append(f"early_stopping.patience must be an integer >= 1 (epochs without improvement), got {patience!r}")
    delta = value.get("min_delta", 0.0)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not delta >= 0:
        problems.append(f"early_stopping.min_delta must be a number >= 0, got {delta!r}")
    monitor = value.get("monitor", "val_acc")
    if monitor not in MONITORS:
        problems.append(f"early_stopping.monitor must be one of {', '.join(MONITORS)}, got {monitor!r}")
    return problems


@dataclass
class EarlyStopping:
    patience: int
    min_delta: float = 0.0
    monitor: str = "val_acc"
    best: float = math.nan
    best_epoch: int = 0
    best_metrics: dict[str, float] = field(default_factory=dict)
    best_model: dict[str, torch.Tensor] | None = None
    last_epoch: int = 0  # the last epoch trained: where training stopped
    stopped: bool = False

    @classmethod
    def from_config(cls, value: dict[str, Any] | None) -> EarlyStopping | None:
        if value is None:
            return None
        return cls(int(value["patience"]), float(value.get("min_delta", 0.0)), str(value.get("monitor", "val_acc")))

    def improved(self, value: float) -> bool:
        if math.isnan(self.best):
            return True
        if MONITORS[self.monitor] == "max":
            return value > self.best + self.min_delta
        return value < self.best - self.min_delta

    def update(self, epoch: int, metrics: dict[str, float], model: torch.nn.Module) -> bool:
        """Record the epoch; True when training should stop now."""
        value, self.last_epoch = float(metrics[self.monitor]), epoch
        if self.improved(value):
            self.best, self.best_epoch, self.best_metrics = value, epoch, dict(metrics)
            self.best_model = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        self.stopped = epoch - self.best_epoch >= self.patience
        return self.stopped

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "best_epoch": self.best_epoch,
            "best_metrics": self.best_metrics,
            "best_model": self.best_model,
            "last_epoch": self.last_epoch,
            "stopped": self.stopped,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_epoch = float(state["best"]), int(state["best_epoch"])
        self.best_metrics, self.best_model = dict(state["best_metrics"]), state["best_model"]
        self.last_epoch, self.stopped = int(state["last_epoch"]), bool(state["stopped"])
