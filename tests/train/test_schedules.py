from __future__ import annotations

import itertools
import math

import pytest
import torch

from hpsearch.parts.schedules import SCHEDULES, LrCurve, build_scheduler, lr_factor, make_curve

SPE, EPOCHS = 10, 10  # optimizer steps per epoch, epochs
TOTAL, WARMUP = SPE * EPOCHS, 2 * SPE


def curve(schedule: str, **kw) -> LrCurve:
    return LrCurve(schedule, TOTAL, kw.pop("warmup_steps", WARMUP), SPE, **kw)


@pytest.mark.parametrize(
    ("schedule", "options", "final"),
    [
        ("cosine", {"min_lr_ratio": 0.1}, 0.1),
        ("linear", {"min_lr_ratio": 0.05}, 0.05),
        ("step", {"gamma": 0.5, "step_epochs": 3}, 0.5**2),  # 8 epochs after warmup: decays at 3 and 6
        ("exponential", {"gamma": 0.9}, 0.9**8),  # per epoch, 8 epochs after warmup
        ("onecycle", {"div_factor": 25, "final_div_factor": 1e4}, 1 / 25e4),
        ("constant", {}, 1.0),
    ],
)
def test_curve_reaches_base_lr_after_warmup_and_expected_final(schedule: str, options: dict, final: float) -> None:
    c = curve(schedule, **options)
    assert lr_factor(WARMUP, c) == pytest.approx(1.0)
    assert lr_factor(TOTAL, c) == pytest.approx(final, rel=1e-9)
    values = [lr_factor(s, c) for s in range(WARMUP, TOTAL + 1)]
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(values)), "lr must not rise after warmup"


def test_every_registered_schedule_is_covered() -> None:
    assert set(SCHEDULES) == {"cosine", "linear", "step", "exponential", "onecycle", "constant"}


def test_linear_warmup_starts_at_start_factor() -> None:
    c = curve("cosine", warmup_start_factor=0.01)
    assert lr_factor(0, c) == pytest.approx(0.01)
    assert lr_factor(WARMUP // 2, c) == pytest.approx(0.01 + 0.99 / 2)


def test_onecycle_starts_at_lr_over_div_factor_and_defaults_to_30_percent_warmup() -> None:
    c = make_curve({"schedule": "onecycle", "div_factor": 10}, TOTAL, SPE)
    assert c.warmup_steps == 30
    assert lr_factor(0, c) == pytest.approx(0.1)
    assert lr_factor(30, c) == pytest.approx(1.0)


def test_step_gamma_applies_once_per_step_epochs() -> None:
    c = curve("step", warmup_steps=0, gamma=0.1, step_epochs=3)
    assert lr_factor(3 * SPE - 1, c) == pytest.approx(1.0)
    assert lr_factor(3 * SPE, c) == pytest.approx(0.1)


def test_warmup_length_from_epochs_or_fraction() -> None:
    assert make_curve({"warmup_epochs": 1.5}, TOTAL, SPE).warmup_steps == 15
    assert make_curve({"warmup_fraction": 0.25}, TOTAL, SPE).warmup_steps == 25
    assert make_curve({}, TOTAL, SPE).warmup_steps == 0


def test_scheduler_sets_optimizer_lr_per_optimizer_step() -> None:
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.4)
    config = {"schedule": "cosine", "warmup_epochs": 2, "min_lr_ratio": 0.0}
    scheduler = build_scheduler(optimizer, config, TOTAL, SPE)
    seen = [optimizer.param_groups[0]["lr"]]
    for _ in range(TOTAL):
        optimizer.step()
        scheduler.step()
        seen.append(optimizer.param_groups[0]["lr"])
    assert seen[0] == pytest.approx(0.4 * 0.01)
    assert seen[WARMUP] == pytest.approx(0.4)
    assert seen[WARMUP + (TOTAL - WARMUP) // 2] == pytest.approx(0.2)
    assert seen[TOTAL] == pytest.approx(0.0, abs=1e-12)
    assert "lr_lambdas" in scheduler.state_dict() and not math.isnan(seen[-1])
