"""The reporter: TensorBoard scalars read back with tensorboard's own reader, pruning and divergence signals."""

from __future__ import annotations

import pytest

from hpsearch.trial.reporter import Diverged, Pruned, Reporter


def scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_each_epoch_becomes_tensorboard_scalars_under_their_tags(tmp_path):
    reporter = Reporter(trial_dir=tmp_path)
    reporter.report(1, {"val_acc": 0.5, "train_loss": 2.0, "custom": 7})
    reporter.report(2, {"val_acc": 0.75, "train_loss": 1.0, "custom": 8})
    reporter.close(hparams={"lr": 0.1, "optimizer": "sgd"}, final={"val_acc": 0.75})
    got = scalars(tmp_path)
    assert got["val/acc"] == [(1, 0.5), (2, 0.75)]
    assert got["train/loss"] == [(1, 2.0), (2, 1.0)]
    assert got["metrics/custom"] == [(1, 7.0), (2, 8.0)]
    assert reporter.epochs == 2 and reporter.history[-1] == {"epoch": 2, "val_acc": 0.75, "train_loss": 1.0, "custom": 8.0}


def test_the_prune_hook_stops_the_trial_at_the_epoch_it_says():
    reporter = Reporter(prune_hook=lambda epoch, metrics: epoch >= 2)
    reporter.report(1, {"val_acc": 0.1})
    with pytest.raises(Pruned) as stop:
        reporter.report(2, {"val_acc": 0.1})
    assert stop.value.reason == "pruned at epoch 2"


def test_a_nan_metric_is_divergence_before_the_hook_is_asked():
    asked = []
    reporter = Reporter(prune_hook=lambda epoch, metrics: asked.append(epoch) or False)
    with pytest.raises(Diverged, match="diverged at epoch 1 \\(train_loss not finite\\)"):
        reporter.report(1, {"train_loss": float("nan"), "val_acc": 0.5})
    assert asked == []


def test_checkpoints_round_trip_and_a_reporter_without_a_path_keeps_none(tmp_path):
    reporter = Reporter(checkpoint_path=tmp_path / "ckpt.pt")
    assert reporter.load_checkpoint() is None
    reporter.save_checkpoint({"epoch": 3, "w": [1, 2]})
    assert reporter.load_checkpoint() == {"epoch": 3, "w": [1, 2]}
    Reporter().save_checkpoint({"epoch": 1})  # no path: nothing written, no error
