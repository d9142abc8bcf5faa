from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import hpsearch.objectives.image_classification as recipe
from hpsearch.parts.models import build_model
from hpsearch.parts.validate import DEFAULTS

EPOCH_KEYS = {"train_loss", "val_loss", "val_acc", "lr", "samples_per_s", "epoch_time_s", "peak_mem_mb"}
SMALL = {"dataset": "digits", "model": "mlp", "mlp_hidden": [32], "batch_size": 64, "lr": 0.05, "seed": 3}


@pytest.mark.slow
def test_digits_resnet8_reaches_95_percent_in_six_epochs(tmp_path: Path, reporter_cls) -> None:
    config = {"dataset": "digits", "model": "resnet8", "batch_size": 64, "lr": 0.1, "epochs": 6, "evaluate_test": True, "save_model": True}
    reporter = reporter_cls(tmp_path)
    result = recipe.train(config, reporter)
    assert result["val_acc"] >= 0.95 and result["test_acc"] >= 0.93
    assert reporter.epochs == [1, 2, 3, 4, 5, 6]
    assert all(set(m) == EPOCH_KEYS and all(isinstance(v, float) for v in m.values()) for _, m in reporter.reports)
    assert {"val_acc", "best_val_acc", "val_loss", "train_loss", "samples_per_s", "epochs", "peak_mem_mb", "test_acc", "test_loss"} == set(
        result
    )
    assert result["epochs"] == 6 and result["best_val_acc"] >= result["val_acc"]
    model = build_model("resnet8", 10, (1, 8, 8), {})
    model.load_state_dict(torch.load(tmp_path / "model.pt"))  # the saved weights fit the named model


def _params(reporter) -> dict[str, torch.Tensor]:
    return reporter.checkpoint["model"]


def test_killed_run_resumes_from_checkpoint_and_matches_uninterrupted(reporter_cls, stop_cls) -> None:
    config = {**SMALL, "epochs": 4, "aug_cutout": 2}  # cosine lr and random cutout: both must resume exactly
    full = reporter_cls()
    expected = recipe.train(config, full)
    killed = reporter_cls(stop_at=3)  # dies while reporting epoch 3, after epoch 2's checkpoint
    with pytest.raises(stop_cls):
        recipe.train(config, killed)
    resumed = reporter_cls(checkpoint=killed.checkpoint)
    assert resumed.checkpoint["epoch"] == 2
    result = recipe.train(config, resumed)
    assert resumed.epochs == [3, 4]
    for (_, got), (_, want) in zip(resumed.reports, full.reports[2:], strict=True):
        assert (got["train_loss"], got["val_loss"], got["val_acc"], got["lr"]) == (
            want["train_loss"],
            want["val_loss"],
            want["val_acc"],
            want["lr"],
        )
    assert all(torch.equal(_params(resumed)[k], _params(full)[k]) for k in _params(full))
    assert result["val_acc"] == expected["val_acc"] and result["epochs"] == 4


def test_two_epoch_checkpoint_extends_to_four_epochs(reporter_cls) -> None:
    config = {**SMALL, "schedule": "constant"}
    full = reporter_cls()
    recipe.train({**config, "epochs": 4}, full)
    short = reporter_cls()
    recipe.train({**config, "epochs": 2}, short)
    extended = reporter_cls(checkpoint=short.checkpoint)
    recipe.train({**config, "epochs": 4}, extended)
    assert extended.epochs == [3, 4]
    assert [m["val_loss"] for _, m in extended.reports] == [m["val_loss"] for _, m in full.reports[2:]]
    assert all(torch.equal(_params(extended)[k], _params(full)[k]) for k in _params(full))


def test_reporter_without_checkpoint_methods_works() -> None:
    class Minimal:
        trial_dir = None
        seen: list[int] = []

        def report(self, epoch: int, metrics: dict[str, float]) -> None:
            self.seen.append(epoch)

    reporter = Minimal()
    result = recipe.train({**SMALL, "epochs": 2, "save_model": True}, reporter)
    assert reporter.seen == [1, 2] and result["epochs"] == 2


@pytest.mark.parametrize("flush", [True, False])
def test_flush_denormal_sets_the_training_threads_float_mode(reporter_cls, flush: bool) -> None:
    # Subnormal floats (below float32's smallest normal, 1.2e-38) cost x86 many cycles each;
    # AdamW's second moments of dead units decay into them. Flushed, they compute as zero.
    if not torch.set_flush_denormal(False):  # False: this CPU has no such mode
        pytest.skip("no flush-to-zero mode on this CPU")
    try:
        recipe.train({**SMALL, "epochs": 1, "flush_denormal": flush}, reporter_cls())
        tiny = torch.tensor([1e-39], dtype=torch.float32) * 1.0
        assert (tiny.item() == 0.0) is flush
    finally:
        torch.set_flush_denormal(False)  # the test process's own default


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_fused_kernels_train_alike_under_fp16_loss_scaling(reporter_cls, optimizer: str) -> None:
    # fp16 on CPU steps through a GradScaler, which hands a fused optimizer its scale and inf flag
    runs = []
    for fused in (True, False):
        reporter = reporter_cls()
        config = {**SMALL, "epochs": 2, "amp": "fp16", "optimizer": optimizer, "lr": 0.003 if optimizer == "adamw" else 0.05}
        recipe.train({**config, "fused_optimizer": fused}, reporter)
        runs.append([m["train_loss"] for _, m in reporter.reports])
    assert runs[0] == pytest.approx(runs[1], rel=1e-3)
    assert runs[0][-1] < runs[0][0]


@pytest.mark.slow
def test_resnet20_trains_on_synthetic_images(reporter_cls) -> None:
    config = {
        "dataset": "synthetic",
        "synthetic_samples": 160,
        "model": "resnet20",
        "batch_size": 32,
        "epochs": 1,
        "aug_crop_padding": 4,
        "aug_hflip": True,
        "aug_cutout": 8,
    }
    reporter = reporter_cls()
    result = recipe.train(config, reporter)
    assert reporter.epochs == [1] and result["train_loss"] > 0 and result["samples_per_s"] > 0
    assert "test_acc" not in result  # synthetic has no test split


def test_invalid_config_raises_with_every_problem() -> None:
    with pytest.raises(ValueError, match="unknown optimizer 'sgdd'") as info:
        recipe.train({"optimizer": "sgdd", "batch_size": 0}, reporter=None)
    assert "batch_size must be an integer >= 1, got 0" in str(info.value)


def test_every_config_key_is_documented_in_the_recipe_table() -> None:
    table = recipe.__doc__
    missing = [k for k in DEFAULTS if f"| {k} " not in table and f" {k}," not in table and f", {k} " not in table]
    assert missing == []
    assert recipe.train.validate is recipe.validate


@pytest.mark.slow
def test_objective_imports_neither_optuna_nor_ray() -> None:
    code = "import sys, hpsearch.objectives.image_classification; print(sorted({'optuna', 'ray'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"
