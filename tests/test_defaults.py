"""Budget-aware defaults (hpsearch/spec/defaults.py): what a spec that leaves sampler and pruner
unset gets, that a key set in the spec wins, and that `hpsearch validate` says both."""

from __future__ import annotations

import pytest

from hpsearch.spec.defaults import resolve
from hpsearch.spec.loader import Spec
from hpsearch.study.open import build_pruner, build_sampler

SPACE = {"lr": {"float": [1.0e-4, 1.0], "log": True}}


def spec(trials: int = 12, epochs: int | None = 6, workers: int | None = None, **keys) -> Spec:
    raw = {"study": "s", "metric": "val_acc", "budget": {"trials": trials}, "space": SPACE, **keys}
    if epochs is not None:
        raw["fixed"] = {"epochs": epochs}
    if workers is not None:
        raw["resources"] = {"workers": workers}
    return Spec.model_validate(raw)


def resolved(s: Spec) -> dict[str, object]:
    return {r.key: r.value for r in resolve(s)}


@pytest.mark.parametrize(("trials", "startup"), [(4, 3), (12, 3), (24, 3), (48, 6), (80, 10), (500, 10)])
def test_start_up_trials_follow_the_budget(trials, startup):
    s = spec(trials=trials)
    assert resolved(s)["sampler.startup_trials"] == startup
    assert build_sampler(s)._n_startup_trials == startup  # what Optuna's TPE really gets


def test_hyperband_when_a_trial_has_epochs_to_prune_in_else_median():
    assert resolved(spec(epochs=6))["pruner.name"] == "hyperband"
    assert type(build_pruner(spec(epochs=6))).__name__ == "HyperbandPruner"
    assert resolved(spec(epochs=2))["pruner.name"] == "median"
    assert resolved(spec(epochs=None))["pruner.name"] == "median"


def test_constant_liar_only_with_several_workers():
    assert resolved(spec(workers=1))["sampler.constant_liar"] is False
    assert resolved(spec(workers=4))["sampler.constant_liar"] is True
    assert build_sampler(spec(workers=4))._constant_liar is True


def test_keys_set_in_the_spec_win():
    s = spec(trials=100, sampler={"startup_trials": 20}, pruner={"name": "median"})
    by_key = {r.key: r for r in resolve(s)}
    assert by_key["sampler.startup_trials"].value == 20 and by_key["pruner.name"].value == "median"
    assert by_key["pruner.name"].why == "set in the spec"
    assert type(build_pruner(s)).__name__ == "MedianPruner"


def test_several_metrics_get_no_pruner():
    s = Spec.model_validate({"study": "s", "metric": ["a", "b"], "direction": ["maximize", "minimize"], "space": SPACE})
    assert resolved(s)["pruner.name"] == "none"


def test_validate_prints_each_resolved_default_and_why(tmp_path, capsys):
    from hpsearch.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(
        "study: s\nobjective: tests.fixtures.toy:objective\nmetric: val_acc\nbudget: {trials: 48}\n"
        "fixed: {epochs: 6}\nspace:\n  lr: {float: [0.0001, 1.0], log: true}\n"
    )
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "default sampler.startup_trials: 6 (budget.trials 48: one random trial per 8" in out
    assert "default pruner.name: hyperband (6 epochs per trial" in out
    assert "pruner hyperband" in out
