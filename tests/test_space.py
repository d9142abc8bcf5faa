from __future__ import annotations

import optuna
import pytest

from hpsearch.search.space import Choice, Const, Float, Int, parse_space

CONDITIONAL = {
    "lr": {"float": ["1e-4", 1.0], "log": True},
    "batch_size": {"int": [16, 128], "step": 16},
    "optimizer": {
        "choice": {
            "sgd": {"momentum": {"float": [0.8, 0.99]}, "nesterov": {"choice": [True, False]}},
            "adamw": {"beta1": {"float": [0.85, 0.95]}, "beta2": {"float": [0.95, 0.999]}},
            "adam": None,
        }
    },
}


def parse(raw):
    errors: list[str] = []
    space = parse_space(raw, "space", errors)
    return space, errors


def test_parse_kinds():
    space, errors = parse({**CONDITIONAL, "warm": 3})
    assert errors == []
    assert space.params["lr"] == Float(1e-4, 1.0, log=True)
    assert space.params["batch_size"] == Int(16, 128, step=16)
    assert isinstance(space.params["optimizer"], Choice) and space.params["optimizer"].conditional
    assert space.params["warm"] == Const(3)


def test_conditional_parameters_follow_the_chosen_option():
    space, _ = parse(CONDITIONAL)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(30):
        trial = study.ask()
        config = space.suggest(trial)
        seen.add(config["optimizer"])
        if config["optimizer"] == "sgd":
            assert {"momentum", "nesterov"} <= set(config) and not {"beta1", "beta2"} & set(config)
            assert "optimizer.sgd.momentum" in trial.params and "optimizer.adamw.beta1" not in trial.params
        elif config["optimizer"] == "adamw":
            assert {"beta1", "beta2"} <= set(config) and not {"momentum", "nesterov"} & set(config)
        else:
            assert set(config) == {"lr", "batch_size", "optimizer"}
        assert space.config_from_params(trial.params) == config
        assert space.params_from_config(config) == trial.params
        study.tell(trial, 0.0)
    assert seen == {"sgd", "adamw", "adam"}


def test_representative_configs_visit_every_option():
    space, _ = parse(CONDITIONAL)
    options = {c["optimizer"] for c in space.representative_configs()}
    assert options == {"sgd", "adamw", "adam"}


def test_grid_only_for_finite_spaces():
    space, _ = parse({"a": {"choice": [1, 2]}, "b": {"int": [0, 4], "step": 2}, "c": {"float": [0, 1], "step": 0.5}})
    assert space.grid() == {"a": [1, 2], "b": [0, 2, 4], "c": [0.0, 0.5, 1.0]}
    assert parse(CONDITIONAL)[0].grid() is None


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ({"lr": {"float": [1.0, 0.1]}}, "space.lr.float: low must be < high, got low=1.0 high=0.1"),
        ({"lr": {"float": [0, 1], "log": True}}, "space.lr.float: a log scale needs low > 0"),
        ({"lr": {"float": [0.1]}}, "space.lr.float: must be [low, high]"),
        ({"lr": {"float": ["a", 1]}}, "low and high must be numbers"),
        ({"n": {"int": [1.5, 4]}}, "space.n.int: low and high must be integers"),
        ({"lr": {"uniform": [0, 1]}}, "space.lr: needs exactly one of float, int, choice"),
        ({"lr": {"float": [0, 1], "int": [0, 1]}}, "needs exactly one of float, int, choice (found float, int)"),
        ({"lr": {"float": [0, 1], "lg": True}}, "space.lr.lg: unknown key for a float parameter"),
        ({"o": {"choice": []}}, "space.o.choice: needs at least one option"),
        ({"o": {"choice": [1, 1]}}, "space.o.choice: options repeat"),
        ({"o": [1, 2]}, "space.o: a bare list is ambiguous"),
        ({"x": {"float": [0, 1], "step": 0.3}}, "space.x.step: (high - low) must be a multiple of step"),
        ({"x": {"float": [0.1, 1], "log": True, "step": 0.1}}, "space.x: log and step cannot be combined"),
        ({"o": {"choice": {"sgd": {"m": {"float": [2, 1]}}}}}, "space.o.choice.sgd.m.float: low must be < high"),
    ],
)
def test_parse_errors_name_the_key(raw, fragment):
    _, errors = parse(raw)
    assert len(errors) == 1 and fragment in errors[0], errors
