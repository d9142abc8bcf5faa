"""bench/quality: Tier C's live curve, the warm-start method, repeatable Hyperband runs, and how
the renderer sorts runs into tiers. The figures themselves live in bench/results/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FASHION = Path("/usr/share/datasets/fashion-mnist")
needs_fashion = pytest.mark.skipif(not (FASHION / "train-images-idx3-ubyte.gz").is_file(), reason="dataset-fashion-mnist not installed")


@pytest.fixture(scope="module")
def quality() -> Any:
    pytest.importorskip("mfpbench")
    from bench.quality import methods, registry, render, stats

    return {"methods": methods, "registry": registry, "render": render, "stats": stats}


@pytest.mark.slow
@needs_fashion
def test_a_live_trial_trains_only_the_epochs_the_method_asks_for(quality: Any) -> None:
    import torch

    from bench.quality.live import LiveTask

    threads = torch.get_num_threads()
    task = LiveTask()
    task.fixed().update(train_subset=600, val_subset=300)
    config = {"optimizer": "adamw", "lr": 1e-3, "beta2": 0.99, "batch_size": 64, "weight_decay": 1e-4}
    pruned = task.curve(config, 6, seed=1)
    seen = [v for _, v in zip(range(2), pruned, strict=False)]  # the method stops listening after epoch 2
    pruned.close()
    assert len(seen) == 2 and pruned.values == seen
    assert pruned._thread is not None and not pruned._thread.is_alive()  # the training stopped there
    full = task.curve(config, 6, seed=1)
    assert 0.0 < full[-1] <= 1.0 and len(full.values) == 6  # [-1] trains to the end
    assert full.values[:2] == seen  # the same seed trains the same way
    full.close()
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_the_warm_start_counts_its_source_and_reruns_its_best_two(quality: Any) -> None:
    methods = quality["methods"]
    task = quality["registry"].make_task("mfh3_good")
    trace = methods.hpsearch_warm(task, 48, seed=3)
    assert trace.spent[0] > methods.SOURCE_EPOCHS  # the source's 24 epochs come first
    assert trace.spent[-1] <= 48 and trace.trials >= 2


@pytest.mark.slow
def test_hyperband_searches_repeat_seed_by_seed(quality: Any) -> None:
    registry, stats = quality["registry"], quality["stats"]
    task = registry.make_task("mfh3_good")
    a, b = (registry.METHODS["hpsearch"].run(task, 72, seed=7) for _ in range(2))
    assert a.spent == b.spent and a.incumbent == b.incumbent and a.pruned == b.pruned
    assert stats.regret_at(a, 72, task.reference(), task.direction) == stats.regret_at(b, 72, task.reference(), task.direction)


def test_the_renderer_keeps_calibration_runs_apart_from_results(quality: Any) -> None:
    render = quality["render"]

    def run(tier: str, seeds: list[int], methods: list[str]) -> dict[str, Any]:
        rows = {m: {"median_regret": 0.1, "win_rate_vs_optuna_default": 0.5} for m in methods}
        return {
            "tier": tier,
            "seeds": seeds,
            "methods": methods,
            "wall_s": 1.0,
            "tasks": {"t": {"budgets": {"72": {"targets": {}, "methods": rows}}}},
        }

    named = render.classify(
        [
            run("synthetic", [200, 700], ["random", "sobol", "optuna_default", "hpsearch"]),
            run("synthetic", [200, 700], ["random", "dehb"]),
            run("synthetic", [0, 40], ["optuna_default", "hp_median"]),
            run("synthetic", [0, 40], ["optuna_default", "hp_bo"]),
            run("synthetic", [200, 240], ["random", "optuna_default", "hpsearch", "ray_asha"]),
            run("table", [200, 240], ["random", "optuna_default", "ray_bohb"]),
            json.loads('{"name": "search_quality", "headline": "a status summary, not a run"}'),
        ]
    )
    assert set(named) == {"synthetic", "calibration_synthetic", "ray", "bohb_table"}
    assert "ray_asha" in named["ray"]["methods"]  # the BOHB run does not take the ASHA run's place
    assert named["synthetic"]["methods"] == ["random", "sobol", "optuna_default", "hpsearch", "dehb"]  # the peers merged in
    assert named["calibration_synthetic"]["methods"] == ["optuna_default", "hp_median", "hp_bo"]  # calibrations merged
    assert "hp_median" not in named["synthetic"]["tasks"]["t"]["budgets"]["72"]["methods"]
