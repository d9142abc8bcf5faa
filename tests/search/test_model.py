"""sampler bo: whole configs over the tree, every reported epoch in the model, pruned trials included."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest

from hpsearch.search.model import CurveModelSampler, CurvePruner, Curves
from hpsearch.search.space import Choice, Float, Int, Space, parse_space

optuna.logging.set_verbosity(optuna.logging.WARNING)

CONDITIONAL = parse_space(
    {
        "optimizer": {"choice": {"sgd": {"lr": {"float": [1e-3, 1.0], "log": True}}, "adam": {"lr": {"float": [1e-5, 1e-2], "log": True}}}},
        "batch_size": {"choice": [32, 64, 128]},
        "depth": {"int": [1, 8]},
    },
    "space",
    [],
)


def curve(config: dict, epochs: int = 4) -> list[float]:
    """Loss falling to a floor set by lr's distance from a per-optimizer optimum (lower is better)."""
    best = -1.0 if config["optimizer"] == "sgd" else -3.5
    floor = 0.1 + (math.log10(config["lr"]) - best) ** 2 + 0.01 * config["depth"]
    return [floor + 1.0 / e for e in range(1, epochs + 1)]


def run(sampler: optuna.samplers.BaseSampler, trials: int, pruner: optuna.pruners.BasePruner | None = None) -> optuna.Study:
    study = optuna.create_study(sampler=sampler, pruner=pruner or optuna.pruners.NopPruner())
    for _ in range(trials):
        trial = study.ask()
        config = CONDITIONAL.suggest(trial)
        values = curve(config)
        for epoch, value in enumerate(values, start=1):
            trial.report(value, epoch)
            if trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            study.tell(trial, values[-1])
    return study


@pytest.mark.slow
def test_proposals_are_whole_configs_of_the_tree():
    study = run(CurveModelSampler(CONDITIONAL, seed=0, startup_trials=3, max_step=4), trials=15)
    for t in study.trials:
        option = t.params["optimizer"]
        assert set(t.params) == {"optimizer", f"optimizer.{option}.lr", "batch_size", "depth"}
        assert t.params["batch_size"] in (32, 64, 128) and isinstance(t.params["depth"], int)
        low, high = (1e-3, 1.0) if option == "sgd" else (1e-5, 1e-2)
        assert low <= t.params[f"optimizer.{option}.lr"] <= high


@pytest.mark.slow
def test_it_finds_the_region_random_search_misses():
    """Same 20 trials, same seeds: the model's best loss is lower than random search's on most seeds."""
    wins = 0
    for seed in range(6):
        bo = run(CurveModelSampler(CONDITIONAL, seed=seed, startup_trials=4, max_step=4), trials=20).best_value
        random = run(optuna.samplers.RandomSampler(seed=seed), trials=20).best_value
        wins += bo < random
    assert wins >= 5, wins


def test_pruned_trials_are_points_of_the_model():
    pruner = optuna.pruners.ThresholdPruner(upper=1.0)  # stops every trial whose loss is still above 1.0
    study = run(CurveModelSampler(CONDITIONAL, seed=1, startup_trials=3, max_step=4), trials=12, pruner=pruner)
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned
    curves = Curves(CurveModelSampler(CONDITIONAL).matrix, study, max_step=4)
    assert len(curves.trials) == len(study.trials)  # every trial, pruned ones too
    x, y = curves.points(CurveModelSampler(CONDITIONAL).matrix)
    assert len(y) >= len(study.trials) and np.isfinite(y).all()


@pytest.mark.slow
def test_the_curve_pruner_stops_a_hopeless_trial_and_keeps_a_promising_one():
    sampler = CurveModelSampler(CONDITIONAL, seed=2, startup_trials=3, max_step=4)
    study = run(sampler, trials=12)
    pruner = CurvePruner(p=0.05)
    good = dict(study.best_trial.params)
    bad = {**good, **{k: v for k, v in good.items() if k.endswith(".lr")}}
    option = good["optimizer"]
    bad[f"optimizer.{option}.lr"] = 1.0 if option == "sgd" else 1e-5  # far from the optimum: a high floor
    for params, expect in ((bad, True), (good, False)):
        trial = study.ask(fixed_distributions(study, params))
        values = curve(CONDITIONAL.config_from_params(params))
        trial.report(values[0], 1)
        trial.report(values[1], 2)
        frozen = study.get_trials(deepcopy=False)[-1]
        assert pruner.prune(study, frozen) is expect
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)


def fixed_distributions(study: optuna.Study, params: dict) -> dict:
    dists = study.best_trial.distributions
    option = params["optimizer"]
    return {k: v for k, v in dists.items() if not k.startswith("optimizer.") or k.startswith(f"optimizer.{option}.")}


def test_past_its_trial_limit_tpe_takes_over_and_it_says_so_once(capsys):
    tree = Space({"x": Float(0.0, 1.0), "n": Int(1, 4), "c": Choice(("a", "b"))})
    sampler = CurveModelSampler(tree, seed=0, startup_trials=2, max_step=4, max_trials=6)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: tree.suggest(t)["x"] ** 2, n_trials=12)
    err = capsys.readouterr().err
    assert err.count("sampler bo: 6 trials: past bo's 6; TPE proposes the rest") == 1
    assert isinstance(sampler.fallback, optuna.samplers.TPESampler)


@pytest.mark.parametrize("workers", [1, 3])
def test_it_keeps_away_from_configs_still_training(workers):
    tree = Space({"x": Float(0.0, 1.0)})
    sampler = CurveModelSampler(tree, seed=0, startup_trials=3, max_step=1)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: (tree.suggest(t)["x"] - 0.3) ** 2, n_trials=8)
    running = [study.ask() for _ in range(workers)]
    xs = [tree.suggest(t)["x"] for t in running]
    assert len(set(np.round(xs, 3))) == workers  # parallel asks do not propose the same point
