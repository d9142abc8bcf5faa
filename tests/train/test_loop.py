from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hpsearch.objectives.image_classification import train
from hpsearch.parts.loop import amp_dtype, evaluate, train_epoch

# 142 samples, val_fraction 0.1 -> 14 validation + 128 training samples: one step of 128
ONE_STEP = {
    "dataset": "synthetic",
    "synthetic_shape": [1, 8, 8],
    "synthetic_samples": 142,
    "synthetic_classes": 4,
    "model": "mlp",
    "mlp_hidden": [32],
    "epochs": 1,
    "schedule": "constant",
    "save_model": True,
}


@pytest.mark.parametrize(("optimizer", "lr"), [("sgd", 0.1), ("adamw", 1e-3)])
def test_accumulated_micro_batches_equal_one_large_batch(tmp_path: Path, reporter_cls, optimizer: str, lr: float) -> None:
    weights = []
    for batch_size, accum_steps in ((128, 1), (32, 4)):
        trial_dir = tmp_path / f"{batch_size}x{accum_steps}"
        trial_dir.mkdir()
        config = {**ONE_STEP, "optimizer": optimizer, "lr": lr, "weight_decay": 0.01, "batch_size": batch_size, "accum_steps": accum_steps}
        train(config, reporter_cls(trial_dir))
        weights.append(torch.load(trial_dir / "model.pt"))
    trial_dir = tmp_path / "frozen"
    trial_dir.mkdir()
    train({**ONE_STEP, "optimizer": "sgd", "lr": 1e-30, "batch_size": 128}, reporter_cls(trial_dir))
    frozen = torch.load(trial_dir / "model.pt")  # the initial weights: lr ~ 0
    for key in weights[0]:
        assert torch.allclose(weights[0][key], weights[1][key], atol=1e-6), key
    moved = [k for k in frozen if not torch.allclose(weights[0][k], frozen[k], atol=1e-5)]
    assert moved, "the optimizer step must move the weights"


def test_divergence_ends_the_run_at_that_epoch(reporter_cls) -> None:
    # step schedule: lr 0.05 in epoch 1, then ×1e8 from epoch 2 on
    config = {
        "dataset": "digits",
        "model": "mlp",
        "batch_size": 64,
        "epochs": 5,
        "lr": 0.05,
        "schedule": "step",
        "step_epochs": 1,
        "gamma": 1e8,
    }
    reporter = reporter_cls()
    with pytest.raises(FloatingPointError, match="loss diverged at epoch 2"):
        train(config, reporter)
    assert reporter.epochs == [1, 2]
    assert math.isfinite(reporter.reports[0][1]["train_loss"])
    assert not math.isfinite(reporter.reports[1][1]["train_loss"])


def test_reporter_exception_on_divergence_propagates(reporter_cls, stop_cls) -> None:
    reporter = reporter_cls(stop_at=1)
    with pytest.raises(stop_cls):
        train({"dataset": "digits", "model": "mlp", "lr": 1e6, "epochs": 3, "schedule": "constant"}, reporter)
    assert reporter.epochs == [1] and not math.isfinite(reporter.reports[0][1]["train_loss"])


def test_train_epoch_stops_early_on_nan_and_evaluate_counts_accuracy() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e30)
    batches = [(torch.randn(8, 4) * 1e6, torch.randint(0, 2, (8,))) for _ in range(20)]
    result = train_epoch(model, batches, optimizer, None, check_every=2)
    assert not math.isfinite(result.mean_loss()) and result.steps < 20
    model = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))
    x, y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]), torch.tensor([0, 1, 1])
    loss, acc = evaluate(model, [(x, y)])
    assert acc == pytest.approx(2 / 3) and loss > 0


def test_auto_precision_is_full_precision_on_cpu() -> None:
    cpu = torch.device("cpu")
    assert amp_dtype("auto", cpu) is None and amp_dtype("bf16", cpu) == torch.bfloat16


# ---------------------------------------------------------------------------- CUDA paths, exercised on CPU where torch allows

BASE = {
    "dataset": "synthetic",
    "synthetic_shape": [3, 8, 8],
    "synthetic_samples": 256,
    "synthetic_classes": 4,
    "model": "resnet8",
    "width": 8,
    "epochs": 2,
    "batch_size": 32,
    "optimizer": "sgd",
    "lr": 0.05,
    "seed": 0,
    "threads": 1,
}


def test_bf16_autocast_on_cpu_trains_and_reports_finite_metrics(reporter_cls) -> None:
    reporter = reporter_cls()
    metrics = train({**BASE, "amp": "bf16"}, reporter)
    assert reporter.epochs == [1, 2]
    assert all(math.isfinite(m["train_loss"]) and math.isfinite(m["val_loss"]) for _, m in reporter.reports)
    assert 0.0 <= metrics["val_acc"] <= 1.0


def test_grad_scaler_on_cpu_steps_the_optimizer_and_clips_unscaled_gradients() -> None:
    """fp16's loss-scaling path (GradScaler, unscale before clipping) with a CPU scaler: the step equals
    the unscaled step, because the scaler divides the gradients back before clipping and stepping."""
    torch.manual_seed(0)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    models = []
    for scaler in (None, torch.amp.GradScaler("cpu", init_scale=1024.0)):
        torch.manual_seed(1)
        model = torch.nn.Linear(5, 3)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        result = train_epoch(model, [(x, y)], optimizer, None, scaler=scaler, grad_clip=0.5, check_every=0)
        assert result.steps == 1
        models.append(model)
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_channels_last_gives_the_same_run_as_the_default_layout(reporter_cls) -> None:
    runs = [train({**BASE, "channels_last": flag}, reporter_cls()) for flag in (False, True)]
    assert math.isclose(runs[0]["val_loss"], runs[1]["val_loss"], rel_tol=1e-3)
