"""What a spec that leaves sampler and pruner unset gets (hpsearch/spec/defaults.py): the sampler
chosen by the space's shape and the budget, every pruner behind the trust gate, a key set in the
spec winning, and `hpsearch validate` saying what each resolved to and why."""

from __future__ import annotations

import pytest

from hpsearch.search.model import CurveModelSampler, CurvePruner
from hpsearch.search.trust import TrustedPruner
from hpsearch.spec.defaults import BO_MAX_TRIALS, resolve
from hpsearch.spec.loader import Spec
from hpsearch.study.open import build_pruner, build_sampler
from tests.conftest import ROOT

RANGES = {"lr": {"float": [1.0e-4, 1.0], "log": True}, "width": {"int": [8, 64]}}
CHOICES = {"lr": {"float": [1.0e-4, 1.0], "log": True}, "batch_size": {"choice": [32, 64, 128]}}  # 2 model inputs
WIDE = {  # 11 model inputs: a one-hot column per option of a choice of words
    "lr": {"float": [1.0e-4, 1.0], "log": True},
    "act": {"choice": ["relu", "gelu", "silu", "tanh", "elu"]},
    "norm": {"choice": ["batch", "layer", "group", "none", "rms"]},
}
CONDITIONAL = {"optimizer": {"choice": {"sgd": {"lr": {"float": [1.0e-3, 1.0], "log": True}}, "adam": {"lr": {"float": [1e-5, 1e-2]}}}}}


def spec(trials: int = 12, epochs: int | None = 6, workers: int | None = None, space: dict | None = None, **keys) -> Spec:
    from hpsearch.search.space import parse_space

    raw = {"study": "s", "metric": "val_acc", "budget": {"trials": trials}, "space": space or RANGES, **keys}
    if epochs is not None:
        raw["fixed"] = {"epochs": epochs}
    if workers is not None:
        raw["resources"] = {"workers": workers}
    s = Spec.model_validate(raw)
    s._tree = parse_space(raw["space"], "space", [])
    return s


def resolved(s: Spec) -> dict[str, object]:
    return {r.key: r.value for r in resolve(s)}


@pytest.mark.parametrize(
    ("space", "trials", "sampler", "pruner"),
    [
        (RANGES, 12, "bo", "model"),  # 2 inputs, 12 trials: the Gaussian process and its pruner
        (CHOICES, 12, "bo", "model"),  # a numeric choice is one ordered input
        (CONDITIONAL, 12, "bo", "model"),  # 4 inputs: the option (2) and each option's lr
        (WIDE, 12, "tpe", "median"),  # 11 inputs: 12 trials are too few for a model of them
        (WIDE, 22, "bo", "model"),  # two trials per input
        (RANGES, BO_MAX_TRIALS + 1, "tpe", "median"),  # past bo's bound
    ],
)
def test_the_sampler_follows_the_space_s_shape_and_the_budget(space, trials, sampler, pruner):
    s = spec(trials=trials, space=space)
    assert resolved(s)["sampler.name"] == sampler and resolved(s)["pruner.name"] == pruner
    built = build_sampler(s)
    assert type(built).__name__ == {"bo": "CurveModelSampler", "tpe": "TPESampler"}[sampler]
    gate = build_pruner(s)
    assert isinstance(gate, TrustedPruner)  # every default pruner sits behind the trust gate
    assert isinstance(gate.inner, CurvePruner) == (pruner == "model")


def test_several_metrics_get_nsga2_and_no_pruner():
    s = Spec.model_validate({"study": "s", "metric": ["a", "b"], "direction": ["maximize", "minimize"], "space": RANGES})
    assert resolved(s)["sampler.name"] == "nsga2" and resolved(s)["pruner.name"] == "none"


@pytest.mark.parametrize(("trials", "startup"), [(4, 3), (8, 4), (12, 6), (48, 6), (300, 6)])
def test_bo_s_start_up_follows_the_budget(trials, startup):
    s = spec(trials=trials)
    assert resolved(s)["sampler.startup_trials"] == startup
    assert build_sampler(s).startup == startup


def test_tpe_keeps_optuna_s_ten_start_up_trials_and_the_median_pruner():
    s = spec(trials=12, space=WIDE)
    assert resolved(s)["sampler.startup_trials"] == 10 and resolved(s)["pruner.name"] == "median"
    assert build_sampler(s)._n_startup_trials == 10  # what Optuna's TPE really gets


def test_bo_gets_the_trial_s_epochs_and_the_start_up():
    built = build_sampler(spec(trials=48))
    assert isinstance(built, CurveModelSampler) and built.max_step == 6 and built.startup == 6


def test_constant_liar_only_with_several_workers():
    assert resolved(spec(workers=1, space=WIDE))["sampler.constant_liar"] is False
    assert resolved(spec(workers=4, space=WIDE))["sampler.constant_liar"] is True
    assert build_sampler(spec(workers=4, space=WIDE))._constant_liar is True


def test_keys_set_in_the_spec_win_and_the_gate_can_be_opened():
    s = spec(trials=100, sampler={"name": "tpe", "startup_trials": 20}, pruner={"name": "median", "trust": None})
    by_key = {r.key: r for r in resolve(s)}
    assert by_key["sampler.startup_trials"].value == 20 and by_key["pruner.name"].value == "median"
    assert by_key["pruner.name"].why == "set in the spec" and "sampler.name" not in by_key
    assert type(build_pruner(s)).__name__ == "MedianPruner"  # trust: null, no gate


def pruned_at_epoch_1(s: Spec) -> bool:
    """Five completed trials whose epoch 1 ranks their end perfectly, then one far worse at epoch 1."""
    import optuna

    study = optuna.create_study(direction="maximize", pruner=build_pruner(s))
    for value in (0.5, 0.6, 0.7, 0.8, 0.9):
        trial = study.ask()
        for epoch in range(1, 7):
            trial.report(value * epoch / 6, epoch)
        study.tell(trial, value)
    trial = study.ask()
    trial.report(0.01, 1)
    return trial.should_prune()


def test_the_gate_not_a_fixed_epoch_says_when_pruning_starts():
    """Epoch 1 is judged where the trust gate watches (calibration: 31 paired seeds won, 10 lost on the
    training-shaped task); with the gate opened (trust: null) or on Ray, epoch 1 is never judged."""
    gated, open_gate = spec(space=WIDE), spec(space=WIDE, pruner={"trust": None})
    assert resolved(gated)["pruner.warmup_epochs"] == 0 and pruned_at_epoch_1(gated)
    assert resolved(open_gate)["pruner.warmup_epochs"] == 1 and not pruned_at_epoch_1(open_gate)
    assert resolved(spec(space=WIDE, backend="ray"))["pruner.warmup_epochs"] == 1
    assert not pruned_at_epoch_1(spec(space=WIDE, pruner={"warmup_epochs": 1}))  # a key set in the spec wins
    page = " ".join((ROOT / "docs" / "search.md").read_text().split())  # what the docs say of it
    assert f"`pruner.warmup_epochs` is {resolved(gated)['pruner.warmup_epochs']} behind the gate on the Optuna backend" in page
    assert f"and {resolved(open_gate)['pruner.warmup_epochs']} without it (`trust: null`, or Ray)" in page


def test_validate_prints_each_resolved_default_and_why(tmp_path, capsys):
    from hpsearch.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(
        "study: s\nobjective: tests.fixtures.toy:objective\nmetric: val_acc\nbudget: {trials: 48}\n"
        "fixed: {epochs: 6}\nspace:\n  lr: {float: [0.0001, 1.0], log: true}\n"
    )
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "default sampler.name: bo (48 trials for 1 model input: a Gaussian process over (config, epoch))" in out
    assert "default sampler.startup_trials: 6 (bo: 6 random trials, at most half of budget.trials 48" in out
    assert "default pruner.name: model (sampler bo: its model of the final value decides)" in out
    assert "sampler bo" in out and "pruner model" in out
