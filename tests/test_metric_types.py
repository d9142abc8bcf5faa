"""Metric values may be Python numbers, 0-d tensors or NumPy scalars, reported or returned."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpsearch.base.text import as_metric
from hpsearch.trial.reporter import Reporter
from hpsearch.trial.run import COMPLETE, FAILED, run_trial


@pytest.mark.parametrize("value", [0.87, 1, torch.tensor(0.87), np.float32(0.87), np.float64(0.87), torch.tensor([0.87])])
def test_numbers_tensors_and_numpy_scalars_are_metrics(value):
    assert as_metric(value) == pytest.approx(0.87 if value != 1 else 1.0, abs=1e-6)


@pytest.mark.parametrize("value", [True, "0.9", None, torch.tensor([0.1, 0.2]), np.array([1.0, 2.0]), [0.9]])
def test_booleans_text_and_several_numbers_are_not(value):
    assert as_metric(value) is None


def tensor_objective(config, reporter):
    for epoch in (1, 2):
        reporter.report(epoch, {"val_acc": torch.tensor(0.5 + 0.1 * epoch), "loss": np.float32(1.0 / epoch)})
    return {"val_acc": torch.tensor(0.7), "loss": np.float64(0.5)}


def list_objective(config, reporter):
    return {"val_acc": [0.7]}


def test_a_trial_that_reports_and_returns_tensors_completes_with_their_values(tmp_path):
    reporter = Reporter(trial_dir=tmp_path)
    outcome = run_trial(tensor_objective, {}, reporter, ["val_acc"])
    assert outcome.state == COMPLETE and outcome.values == [pytest.approx(0.7)]
    assert [h["val_acc"] for h in reporter.history] == [pytest.approx(0.6), pytest.approx(0.7)]


def test_a_metric_that_is_no_number_is_named_with_its_type(tmp_path):
    outcome = run_trial(list_objective, {}, Reporter(trial_dir=tmp_path), ["val_acc"])
    assert outcome.state == FAILED
    assert "returned 'val_acc' as a list, not a number" in outcome.reason
    assert "returned no" not in outcome.reason
