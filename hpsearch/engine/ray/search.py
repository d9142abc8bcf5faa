"""What asks and what stops: the spec's Optuna sampler through OptunaSearch on the same study,
and the spec's Ray scheduler (asha, hyperband, median, pbt, fifo) from the registry.

PBT perturbs the top-level (unconditional) parameters and moves state between trials through
the reporter's ``save_checkpoint``/``load_checkpoint``; a PBT trial's ``config`` attr is its
final (perturbed) config, its params the first sample.
"""

from __future__ import annotations

from typing import Any

import optuna

from hpsearch.base.errors import UserError
from hpsearch.base.interrupts import atomic
from hpsearch.engine.ray.recorder import Recorder
from hpsearch.engine.ray.trial import KEY, trial_number
from hpsearch.search.space import Choice, Const, Float, Int
from hpsearch.spec.loader import Spec
from hpsearch.spec.registry import RAY_SCHEDULERS, RayKit, warmup
from hpsearch.study.checkpoints import resume_source
from hpsearch.study.open import build_sampler
from hpsearch.study.storage import storage_of
from hpsearch.study.warmstart import warm_sampler

DEFAULT_MAX_EPOCHS = 100  # ASHA/HyperBand horizon when neither pruner.max_epochs nor fixed.epochs says


def make_searcher(spec: Spec, storage: Any, sampler: optuna.samplers.BaseSampler, recorder: Recorder) -> Any:
    """OptunaSearch on the spec's study: define-by-run over the space tree; the Recorder writes results."""
    from ray.tune.search.optuna import OptunaSearch

    class StudySearch(OptunaSearch):
        def suggest(self, trial_id: str) -> dict[str, Any] | None:
            with atomic():  # asked and stamped as the driver's, or neither: a Ctrl-C meanwhile waits
                if super().suggest(trial_id) is None:
                    return None
                ot_trial = self._ot_trials[trial_id]
                config = spec.config_for(spec.tree.config_from_params(ot_trial.params))
                recorder.claimed(ot_trial, config)  # stamped with the driver's identity, beating until it ends
            return {KEY: {"trial": ot_trial.number, "config": config, "resume": resume_of(recorder.study, spec, ot_trial)}}

        def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
            pass  # intermediate values: Recorder (keyed by epoch, not by Ray's iteration)

        def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
            self._completed_trials.add(trial_id)  # the end state: Recorder

        def save(self, checkpoint_path: str) -> None:
            pass  # the study storage is the record; Ray's experiment resume is not used

    def space(trial: Any) -> None:
        spec.tree.suggest(trial)

    modes = ["max" if d == "maximize" else "min" for d in spec.directions]
    metric: Any = spec.metrics if len(modes) > 1 else spec.metrics[0]
    return StudySearch(
        space=space, metric=metric, mode=modes if len(modes) > 1 else modes[0], sampler=sampler, study_name=spec.study, storage=storage
    )


def resume_of(study: optuna.Study, spec: Spec, trial: optuna.Trial) -> dict[str, Any] | None:
    """A retry of a trial whose worker died: the checkpoint it starts from (absolute, for Ray workers elsewhere)."""
    source = resume_source(study, spec.study_dir, trial)
    return {"trial": source[0], "path": str(source[1].resolve())} if source else None


def search_setup(spec: Spec, study: optuna.Study, recorder: Recorder, scheduler: str) -> tuple[Any, dict[str, Any] | None]:
    """The search algorithm and param_space for the Tuner.

    PBT refuses a search algorithm, so there Ray's own generator draws each new trial's
    config from a function that asks the same study (and so the same sampler).
    """
    if scheduler != "pbt":
        sampler = warm_sampler(study, build_sampler(spec, len(study.trials)), spec.warm_until)
        return make_searcher(spec, storage_of(study), sampler, recorder), None
    from ray import tune
    from ray.tune.search import BasicVariantGenerator

    def ask(_: Any) -> dict[str, Any]:
        with atomic():
            trial = study.ask()
            config = spec.config_for(spec.tree.suggest(trial))
            recorder.claimed(trial, config)
        return {"trial": trial.number, "config": config, "resume": resume_of(study, spec, trial)}

    return BasicVariantGenerator(), {KEY: tune.sample_from(ask)}


def max_epochs(spec: Spec) -> int:
    epochs = spec.pruner.max_epochs or spec.fixed.get("epochs")
    return int(epochs) if isinstance(epochs, int) and epochs > 0 else DEFAULT_MAX_EPOCHS


def build_scheduler(spec: Spec, study: optuna.Study | None = None) -> Any:
    """The spec's Ray scheduler from the registry; FIFO for several metrics (no scheduler compares vectors).
    With ``study``, asha and median stop a trial only at an epoch the trust gate trusts (``pruner.trust``)."""
    name = spec.ray.scheduler if len(spec.metrics) == 1 else "fifo"
    horizon = max_epochs(spec)
    common = {"time_attr": "epoch", "metric": spec.metrics[0], "mode": "max" if spec.directions[0] == "maximize" else "min"}
    grace = min(warmup(spec) + 1, horizon)  # as with the Optuna pruners, warmup epochs are never stopped
    scheduler = RAY_SCHEDULERS[name].build(spec, RayKit(common, horizon, grace, lambda: build_pbt(spec, common)))
    if study is not None and spec.pruner.trust is not None and name in ("asha", "median"):
        trust_gate(scheduler, study, spec.pruner.trust, spec.pruner.trust_curves)
    return scheduler


def trust_gate(scheduler: Any, study: optuna.Study, threshold: float, curves: int) -> None:
    """A STOP at an epoch whose values do not yet rank the completed trials becomes CONTINUE (search/trust.py).
    Only asha and median: hyperband pauses and pbt exploits, which a gate would unbalance."""
    from optuna.trial import TrialState
    from ray.tune.schedulers import TrialScheduler

    from hpsearch.search.trust import completed_curves, step_trust

    decide = scheduler.on_trial_result

    def on_trial_result(controller: Any, trial: Any, result: dict[str, Any]) -> str:
        decision: str = decide(controller, trial, result)
        if decision == TrialScheduler.STOP:
            done = completed_curves(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
            if not step_trust(int(result.get("epoch", 0)), done, threshold, curves).trusted:
                return str(TrialScheduler.CONTINUE)
        return decision

    scheduler.on_trial_result = on_trial_result


def build_pbt(spec: Spec, common: dict[str, Any]) -> Any:
    from ray.tune.schedulers import PopulationBasedTraining

    class KeepTrialNumber(PopulationBasedTraining):
        """An exploiting trial copies another's config; it must keep its own Optuna trial number."""

        def _get_new_config(self, trial: Any, trial_to_clone: Any) -> tuple[dict[str, Any], dict[str, Any]]:
            config, operations = super()._get_new_config(trial, trial_to_clone)
            config[KEY]["trial"] = trial_number(trial.config)
            return config, operations

    return KeepTrialNumber(
        **common, perturbation_interval=spec.ray.perturbation_interval, hyperparam_mutations=pbt_mutations(spec), require_attrs=False
    )


def pbt_mutations(spec: Spec) -> dict[str, Any]:
    """Top-level parameters only: switching a conditional choice would need the other branch's values."""
    from ray import tune

    out: dict[str, Any] = {}
    for name, p in spec.tree.params.items():
        if isinstance(p, Float):
            out[name] = (
                tune.loguniform(p.low, p.high) if p.log else tune.quniform(p.low, p.high, p.step) if p.step else tune.uniform(p.low, p.high)
            )
        elif isinstance(p, Int):
            out[name] = tune.lograndint(p.low, p.high + 1) if p.log else tune.qrandint(p.low, p.high, p.step)
        elif isinstance(p, Choice) and not p.conditional:
            out[name] = list(p.options)
        elif not isinstance(p, (Const, Choice)):
            raise TypeError(f"unknown parameter {p!r}")
    if not out:
        raise UserError(
            f"{spec.path}: ray.scheduler: pbt needs a top-level parameter to perturb (the space has none outside conditional options)"
        )
    return {KEY: {"config": out}}
