"""bench/quality/ray_methods.py: Ray Tune's BOHB (TuneBOHB + HyperBandForBOHB) spends the budget
as every other method does, through the stand-in for Tune's controller that pauses and resumes."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def bohb() -> Any:
    pytest.importorskip("mfpbench")
    pytest.importorskip("ray.tune")
    pytest.importorskip("hpbandster", reason="hpbandster (TuneBOHB's model) is installed by make bench only")
    from bench.quality.registry import METHODS

    return METHODS["ray_bohb"].run


def test_bohb_counts_every_epoch_and_stops_at_the_budget(bohb: Any) -> None:
    from bench.quality.registry import make_task

    task = make_task("mfh3_good")
    trace = bohb(task, 24, 0)
    assert trace.trials > 0 and trace.spent and trace.spent[-1] <= 24
    assert all(a < b for a, b in zip(trace.spent, trace.spent[1:], strict=False))  # one point per run that trained
    assert all(p <= s for p, s in zip(trace.pruned, trace.spent, strict=True)) and trace.pruned_epochs <= trace.spent[-1]
    # the first bracket: 5 trials to 2 epochs (paused), then 2 of them resumed to 6 and 3 stopped
    assert trace.spent[:5] == [2, 4, 6, 8, 10] and trace.pruned[4] == 6
    assert all(math.isnan(v) for v in trace.incumbent[:5])  # no trial has run 6 epochs yet
    assert not math.isnan(trace.incumbent[-1])  # by 24 epochs one has
    again = bohb(task, 24, 0)  # numpy's global state is seeded per search
    assert again.spent == trace.spent and repr(again.incumbent) == repr(trace.incumbent)


def test_bohb_configs_look_like_every_other_methods(bohb: Any) -> None:
    """Conditional options: TuneBOHB's ConfigSpace names go back through hpsearch's space."""
    from bench.quality.registry import make_task

    task = make_task("shaped")
    seen: list[dict[str, Any]] = []
    curve = task.curve
    task.curve = lambda config, epochs, seed: seen.append(config) or curve(config, epochs, seed)  # type: ignore[method-assign]
    trace = bohb(task, 48, 1)
    assert trace.spent[-1] <= 48 and seen
    keys = {"optimizer", "lr", "batch_size", "weight_decay", "schedule", "warmup_epochs", "label_smoothing"}
    for config in seen:
        extra = {"momentum"} if config["optimizer"] == "sgd" else {"beta2"}
        assert set(config) == keys | extra and isinstance(config["batch_size"], int)
