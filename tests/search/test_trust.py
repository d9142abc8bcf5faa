"""The trust gate: no pruning at an epoch whose values do not yet rank trials as their final values do."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from hpsearch.search.trust import TrustedPruner, spearman, table


def study_with_curves(n: int = 8) -> optuna.Study:
    """Completed trials (maximize) whose epoch 1 ranks them backwards and epochs 2-3 the right way."""
    study = optuna.create_study(direction="maximize")
    for i in range(n):
        final = 0.5 + 0.05 * i
        curve = {1: 0.4 - 0.03 * i, 2: final - 0.1, 3: final - 0.05, 4: final}  # epoch 1: anti-correlated
        study.add_trial(
            create_trial(params={"x": i / n}, distributions={"x": FloatDistribution(0, 1)}, value=final, intermediate_values=curve)
        )
    return study


def running(study: optuna.Study, curve: dict[int, float]) -> optuna.trial.FrozenTrial:
    trial = study.ask({"x": FloatDistribution(0, 1)})
    for step, value in curve.items():
        trial.report(value, step)
    return study.get_trials(deepcopy=False)[-1]


def test_an_anti_correlated_epoch_is_not_trusted_and_a_ranking_one_is():
    rows = {t.step: t for t in table(study_with_curves().trials, threshold=0.5, min_curves=5)}
    assert rows[1].corr == pytest.approx(-1.0) and not rows[1].trusted
    assert rows[2].corr == pytest.approx(1.0) and rows[2].trusted and rows[2].curves == 8
    assert 4 not in rows  # the last epoch is the final value itself
    assert rows[1].text() == "epoch 1: rank corr -1.00 (8 curves): not pruning"


def test_a_trial_worst_at_an_untrusted_epoch_is_kept_and_pruned_once_a_trusted_one_agrees():
    study = study_with_curves()
    gate = TrustedPruner(optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0), threshold=0.5, min_curves=5)
    bare = optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0)
    at_1 = running(study, {1: 0.0})  # the worst epoch-1 value of all
    assert bare.prune(study, at_1)  # the median pruner alone would throw it away here
    assert not gate.prune(study, at_1)
    at_2 = running(study, {1: 0.0, 2: 0.1})  # and at epoch 2, which ranks, it is the worst too
    assert gate.prune(study, at_2)


def test_nothing_is_pruned_before_enough_curves_completed():
    study = study_with_curves(n=4)
    gate = TrustedPruner(optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0), threshold=0.5, min_curves=5)
    assert all(not t.trusted and t.corr is None for t in table(study.trials, 0.5, 5))
    assert not gate.prune(study, running(study, {1: 0.0, 2: 0.0, 3: 0.0}))


def test_spearman_is_zero_for_a_constant_side():
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_the_gate_works_in_any_step_unit():
    """Iterations 100, 200, ...: trust is per reported step, whatever it counts."""
    study = optuna.create_study(direction="minimize")
    for i in range(6):
        curve = {100: 1.0 + 0.1 * i, 200: 0.9 + 0.1 * i, 300: 0.8 + 0.1 * i}
        study.add_trial(create_trial(params={}, distributions={}, value=curve[300], intermediate_values=curve, state=TrialState.COMPLETE))
    rows = {t.step: t.trusted for t in table(study.trials, 0.5, 5)}
    assert rows == {100: True, 200: True}
