"""Learning-rate schedules as pure functions of the optimizer step.

Every schedule is a multiplier of the base lr, stepped once per optimizer step (not per
epoch), so its curve can be computed and tested without training. The first
`warmup_steps` steps ramp linearly from `warmup_start_factor` to 1; the named schedule
then runs over the remaining steps. `build_scheduler` wraps the curve in a LambdaLR.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from hpsearch.parts.settings import setting

# name -> f(progress 0..1 after warmup, steps since warmup, curve) -> lr multiplier
Schedule = Callable[[float, int, "LrCurve"], float]


def _constant(progress: float, steps: int, c: LrCurve) -> float:
    return 1.0


def _cosine(progress: float, steps: int, c: LrCurve) -> float:
    return c.min_lr_ratio + (1.0 - c.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _linear(progress: float, steps: int, c: LrCurve) -> float:
    return 1.0 - (1.0 - c.min_lr_ratio) * progress


def _step(progress: float, steps: int, c: LrCurve) -> float:
    period = max(1, round(c.step_epochs * c.steps_per_epoch))  # optimizer steps per decay
    return c.gamma ** (steps // period)


def _exponential(progress: float, steps: int, c: LrCurve) -> float:
    factor: float = c.gamma ** (steps / max(1, c.steps_per_epoch))  # gamma per epoch, smooth per step (gamma > 0: real)
    return factor


def _onecycle(progress: float, steps: int, c: LrCurve) -> float:
    final = 1.0 / (c.div_factor * c.final_div_factor)
    return final + (1.0 - final) * 0.5 * (1.0 + math.cos(math.pi * progress))


SCHEDULES: dict[str, Schedule] = {
    "constant": _constant,
    "cosine": _cosine,
    "linear": _linear,
    "step": _step,
    "exponential": _exponential,
    "onecycle": _onecycle,
}

ONECYCLE_DEFAULT_WARMUP = 0.3  # fraction of all steps spent rising, as torch's pct_start


@dataclass
class LrCurve:
    """Picklable lr multiplier: LambdaLR stores its __dict__ in the scheduler state."""

    schedule: str
    total_steps: int
    warmup_steps: int
    steps_per_epoch: int
    warmup_start_factor: float = 0.01
    min_lr_ratio: float = 0.0
    gamma: float = 0.1
    step_epochs: float = 30.0
    div_factor: float = 25.0
    final_div_factor: float = 1e4

    def __call__(self, step: int) -> float:
        return lr_factor(step, self)


def lr_factor(step: int, curve: LrCurve) -> float:
    """Multiplier of the base lr after `step` optimizer steps."""
    if step < curve.warmup_steps:
        return _warmup(step / curve.warmup_steps, curve)
    steps = step - curve.warmup_steps
    progress = min(1.0, steps / max(1, curve.total_steps - curve.warmup_steps))
    return SCHEDULES[curve.schedule](progress, steps, curve)


def _warmup(progress: float, c: LrCurve) -> float:
    if c.schedule == "onecycle":  # torch OneCycleLR: cosine rise from lr/div_factor
        start = 1.0 / c.div_factor
        return start + (1.0 - start) * 0.5 * (1.0 - math.cos(math.pi * progress))
    return c.warmup_start_factor + (1.0 - c.warmup_start_factor) * progress


def warmup_steps(config: dict[str, Any], total_steps: int, steps_per_epoch: int) -> int:
    """Warmup length in optimizer steps from warmup_epochs or warmup_fraction."""
    if config.get("warmup_fraction") is not None:
        return round(float(config["warmup_fraction"]) * total_steps)
    if config.get("warmup_epochs"):
        return round(float(config["warmup_epochs"]) * steps_per_epoch)
    if setting(config, "schedule") == "onecycle":
        return round(ONECYCLE_DEFAULT_WARMUP * total_steps)
    return 0


def make_curve(config: dict[str, Any], total_steps: int, steps_per_epoch: int) -> LrCurve:
    schedule = setting(config, "schedule")
    gamma = config.get("gamma")
    return LrCurve(
        schedule=schedule,
        total_steps=total_steps,
        warmup_steps=warmup_steps(config, total_steps, steps_per_epoch),
        steps_per_epoch=steps_per_epoch,
        warmup_start_factor=float(setting(config, "warmup_start_factor")),
        min_lr_ratio=float(setting(config, "min_lr_ratio")),
        gamma=float(gamma if gamma is not None else 0.95 if schedule == "exponential" else 0.1),
        step_epochs=float(setting(config, "step_epochs")),
        div_factor=float(setting(config, "div_factor")),
        final_div_factor=float(setting(config, "final_div_factor")),
    )


def build_scheduler(
    optimizer: torch.optim.Optimizer, config: dict[str, Any], total_steps: int, steps_per_epoch: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR over `make_curve`; call .step() after every optimizer step."""
    curve = make_curve(config, total_steps, steps_per_epoch)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, curve)
