"""The noise-aware incumbent: among the best observed trials, the one the model trusts, not the luckiest draw."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import create_trial

from hpsearch.search.incumbent import best, estimates
from hpsearch.search.space import Float, Space

optuna.logging.set_verbosity(optuna.logging.WARNING)
TREE = Space({"x": Float(0.0, 1.0)})


def noisy_study(noise: float, seed: int = 0) -> tuple[optuna.Study, list[float]]:
    """val_acc = 0.9 - (x - 0.7)^2 plus noise, over 40 evenly spread x (maximize)."""
    rng = np.random.default_rng(seed)
    study = optuna.create_study(direction="maximize")
    truths = []
    for x in np.linspace(0, 1, 40):
        truth = 0.9 - (x - 0.7) ** 2
        truths.append(truth)
        study.add_trial(
            create_trial(params={"x": float(x)}, distributions={"x": FloatDistribution(0, 1)}, value=truth + rng.normal(0, noise))
        )
    return study, truths


@pytest.mark.slow
def test_with_noise_the_pick_is_truly_better_than_the_luckiest_draw():
    gains = []
    for seed in range(40):
        study, truths = noisy_study(noise=0.03, seed=seed)
        luckiest = max(study.trials, key=lambda t: t.value)
        picked = best(study.trials, TREE, maximize=True)
        assert picked is not None
        assert picked.raw == picked.trial.value and picked.value != picked.raw  # the estimate, the raw value beside it
        gains.append(truths[picked.trial.number] - truths[luckiest.number])
    better, worse = sum(g > 0 for g in gains), sum(g < 0 for g in gains)
    assert np.mean(gains) > 0 and better > worse, (np.mean(gains), better, worse)


def test_without_noise_the_pick_is_the_best_observed_trial():
    study, _ = noisy_study(noise=0.0)
    picked = best(study.trials, TREE, maximize=True)
    assert picked is not None and picked.trial.number == max(study.trials, key=lambda t: t.value).number


def test_few_completed_trials_give_the_best_observed_one_unchanged():
    study, _ = noisy_study(noise=0.05)
    few = study.trials[25:29]
    found = estimates(few, TREE, maximize=True)
    assert [e.trial.number for e in found][0] == max(few, key=lambda t: t.value).number
    assert all(e.value == e.raw for e in found)
