"""run_trial: how one call of an objective ends, whatever the objective does."""

from __future__ import annotations

from hpsearch.reporter import Reporter
from hpsearch.trial import COMPLETE, FAILED, PRUNED, run_trial, split_micro_batch
from tests.fixtures.faulty import crash, oom


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
    assert run_trial(lambda c, r: {"acc": 1.0}, {}, Reporter(), ["score"]).reason == "failed: objective returned no 'score' (it returned ['acc'])"
    assert run_trial(lambda c, r: 0.5, {}, Reporter(), ["score"]).reason == "failed: objective returned float, expected a dict of metrics"
    nan = run_trial(lambda c, r: {"score": float("nan")}, {}, Reporter(), ["score"])
    assert nan.state == PRUNED and nan.reason.startswith("diverged")


def test_a_completed_trial_gives_its_values_in_metric_order():
    outcome = run_trial(lambda c, r: {"b": 2, "a": 1.5}, {}, Reporter(), ["a", "b"])
    assert outcome.state == COMPLETE and outcome.values == [1.5, 2.0]


def test_split_micro_batch_keeps_the_samples_per_step():
    assert split_micro_batch({"batch_size": 12, "accum_steps": 2}) == {"batch_size": 6, "accum_steps": 4}
    assert split_micro_batch({"batch_size": 1}) is None
    assert split_micro_batch({"batch_size": "auto"}) is None
