"""run_trial: how one call of an objective ends, whatever the objective does."""

from __future__ import annotations

import pytest

from hpsearch.trial.reporter import Reporter
from hpsearch.trial.run import COMPLETE, FAILED, PRUNED, run_trial, split_micro_batch
from tests.fixtures.faulty import crash, oom


@pytest.mark.slow
def test_out_of_memory_retries_with_half_the_micro_batch_and_the_same_effective_batch(tmp_path):
    reporter = Reporter(trial_dir=tmp_path / "trial-0")
    config = {"batch_size": 64, "accum_steps": 1, "oom_above": 16, "oom_at_epoch": 2, "epochs": 3}
    outcome = run_trial(oom, config, reporter, ["val_acc"])
    reporter.close()
    assert outcome.state == COMPLETE and outcome.oom_retries == 2
    assert outcome.config == {**config, "batch_size": 16, "accum_steps": 4}
    assert outcome.metrics["effective_batch"] == 64 and outcome.metrics["micro_batch"] == 16
    assert [h["epoch"] for h in reporter.history] == [1, 2, 3]  # the reporter starts over on each retry
    assert {h["micro_batch"] for h in reporter.history} == {16}
    assert len(list((tmp_path / "trial-0").glob("events.out.tfevents.*"))) == 1  # one TensorBoard run
    assert outcome.attrs()["oom_retries"] == 2 and outcome.attrs()["config"]["batch_size"] == 16


@pytest.mark.slow
def test_out_of_memory_at_the_floor_fails_the_trial_with_the_micro_batch():
    outcome = run_trial(oom, {"batch_size": 64, "oom_above": 2, "_min_batch_size": 4}, Reporter(), ["val_acc"])
    assert outcome.state == FAILED and outcome.oom_retries == 4
    assert outcome.reason == "failed: out of memory at micro-batch 4 (after 4 retries with smaller micro-batches)"
    assert outcome.config["batch_size"] == 4 and outcome.config["accum_steps"] == 16
    odd = run_trial(oom, {"batch_size": 15, "oom_above": 0}, Reporter(), ["val_acc"])  # 15 -> 5 (x3) -> 1 (x5)
    assert odd.reason.startswith("failed: out of memory at micro-batch 1") and odd.config["accum_steps"] == 15


def test_crash_fixture_reports_before_raising():
    reporter = Reporter()
    outcome = run_trial(crash, {"crash_after_report": True, "message": "x"}, reporter, ["val_acc"])
    assert outcome.state == FAILED and outcome.reason == "failed: RuntimeError: x" and outcome.epochs == 1


def test_a_missing_metric_a_non_dict_and_a_nan_each_end_the_trial_with_a_reason():
    missing = run_trial(lambda c, r: {"acc": 1.0}, {}, Reporter(), ["score"])
    assert missing.reason == "failed: objective returned no 'score' (the spec's metric:); it returned ['acc']"
    assert missing.contract and missing.attrs()["contract_error"] is True  # a bug in the objective or the spec: the study stops
    not_a_dict = run_trial(lambda c, r: 0.5, {}, Reporter(), ["score"])
    assert not_a_dict.reason == "failed: objective returned float, expected a dict of metrics" and not_a_dict.contract
    nan = run_trial(lambda c, r: {"score": float("nan")}, {}, Reporter(), ["score"])
    assert nan.state == PRUNED and nan.reason.startswith("diverged") and not nan.contract


def test_the_first_report_without_the_metric_fails_the_trial_there():
    epochs_run = []

    def misnamed(config, reporter):
        for epoch in range(1, 6):
            epochs_run.append(epoch)
            reporter.report(epoch, {"acc": 0.5, "loss": 1.0})
        return {"score": 0.5, "acc": 0.5}

    outcome = run_trial(misnamed, {}, Reporter(), ["score"])
    assert outcome.state == FAILED and outcome.contract and epochs_run == [1]
    assert outcome.reason == "failed: the first report (epoch 1) has no 'score' (the spec's metric:); it reported ['acc', 'loss']"
    epochs_run.clear()
    several = run_trial(misnamed, {}, Reporter(), ["acc", "score"])  # one of several metrics per epoch is enough
    assert epochs_run == [1, 2, 3, 4, 5] and several.state == COMPLETE and several.values == [0.5, 0.5]


def test_a_raising_objective_leaves_its_traceback_and_the_line_that_raised(tmp_path):
    user = tmp_path / "user_objective.py"
    user.write_text(
        "def helper(config):\n    return config['momentum']\n\n\ndef fit(config, reporter):\n    return {'score': helper(config)}\n"
    )
    import importlib.util

    loaded = importlib.util.spec_from_file_location("user_objective", user)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    reporter = Reporter(trial_dir=tmp_path / "trial-3")
    outcome = run_trial(module.fit, {}, reporter, ["score"])
    assert outcome.reason == "failed: KeyError: 'momentum'" and not outcome.contract
    assert outcome.error_at == f"{user}:2"  # the innermost frame of the user's code, not run_trial's
    text = (tmp_path / "trial-3" / "error.txt").read_text()
    assert "Traceback (most recent call last)" in text and "in helper" in text and text.rstrip().endswith("KeyError: 'momentum'")
    assert outcome.attrs()["traceback"] == text and outcome.attrs()["error_at"] == f"{user}:2"


def test_an_error_message_over_several_lines_is_one_line_in_the_reason():
    def shouts(config, reporter):
        raise ValueError("first line\n  second line\n")

    assert run_trial(shouts, {}, Reporter(), ["score"]).reason == "failed: ValueError: first line second line"


def test_a_completed_trial_gives_its_values_in_metric_order():
    outcome = run_trial(lambda c, r: {"b": 2, "a": 1.5}, {}, Reporter(), ["a", "b"])
    assert outcome.state == COMPLETE and outcome.values == [1.5, 2.0]


def test_split_micro_batch_keeps_the_samples_per_step():
    assert split_micro_batch({"batch_size": 12, "accum_steps": 2}) == {"batch_size": 6, "accum_steps": 4}
    assert split_micro_batch({"batch_size": 1}) is None
    assert split_micro_batch({"batch_size": "auto"}) is None
