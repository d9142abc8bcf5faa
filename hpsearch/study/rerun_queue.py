"""Re-runs of fixed configs (promote, audit) as a study of their own that the engine works through.

``promote`` and ``audit`` queue each (config, seed) run as a WAITING trial of a derived study
("<study>-promote", "<study>-audit", in the same storage) and run the engine's claim loop on
a derived spec (``rerun_spec``): no pruner, any number of slots, and ``hpsearch worker SPEC
--study <study>-promote --storage URL`` on another machine joins the same queue (``joined``).

A re-run study samples nothing: its study user attribute ``reruns`` tells the claim loop to
take WAITING trials only and to stop when none is waiting or running. A run is known by its
trial user attributes ``source_trial``, ``seed`` and ``rerun_config`` (the config queued), so
running promote or audit again reuses every finished run and queues only the missing ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.spec.loader import Budget, PrunerSpec, SamplerSpec, Spec
from hpsearch.study.definition import DEFINITION, definition
from hpsearch.study.storage import count_states, end_trial, open_storage

RERUNS = "reruns"  # study user attribute of a re-run study: {"kind": "promote" | "audit", "source_study": NAME}
RERUN_CONFIG = "rerun_config"  # trial user attribute: the config queued (the run's "config" may lower threads)
QUEUED = (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)  # runs that need no new queueing


@dataclass(frozen=True)
class Run:
    """One re-run: the config of ``source`` (a trial of the searched study) at ``seed``."""

    source: FrozenTrial
    seed: int | None
    config: dict[str, Any]

    def matches(self, trial: FrozenTrial) -> bool:
        a = trial.user_attrs
        queued = a.get(RERUN_CONFIG, a.get("config"))  # "config" alone: a run recorded before runs were queued
        return a.get("source_trial") == self.source.number and a.get("seed") == self.seed and queued == self.config


def is_reruns(study: optuna.Study) -> bool:
    return study.user_attrs.get(RERUNS) is not None


def derived_study(spec: Spec, source: optuna.Study, suffix: str, kind: str) -> optuna.Study:
    """The re-run study beside ``source`` (created once), labelled so readers, the dashboard and workers know it."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(
        storage=open_storage(spec.storage_url, outage_s=spec.storage.outage_s),
        study_name=source.study_name + suffix,
        directions=source.directions,
        load_if_exists=True,
    )
    names = source.user_attrs.get("metric_names") or spec.metrics
    study.set_user_attr("metric_names", list(names)[: len(source.directions)])
    study.set_user_attr("objective", source.user_attrs.get("objective") or spec.objective)
    study.set_user_attr("source_study", source.study_name)
    study.set_user_attr(RERUNS, {"kind": kind, "source_study": source.study_name})
    # What a joining worker's spec must match (study.open_study refuses another objective or fixed: values).
    study.set_user_attr(DEFINITION, definition(spec))
    return study


def finished(study: optuna.Study, run: Run) -> FrozenTrial | None:
    """The completed trial of ``run``, if any (the first one: a run is never queued twice)."""
    return next((t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if run.matches(t)), None)


def last_failure(study: optuna.Study, run: Run) -> FrozenTrial | None:
    failed = [t for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)) if run.matches(t)]
    return max(failed, key=lambda t: t.number, default=None)


def queue(study: optuna.Study, runs: list[Run]) -> int:
    """Add a WAITING trial for each run that is not finished, waiting or running; how many were added.
    A run that failed earlier is queued again."""
    have = study.get_trials(deepcopy=False, states=QUEUED)
    added = 0
    for run in runs:
        if any(run.matches(t) for t in have):
            continue
        study.add_trial(
            optuna.trial.create_trial(
                state=TrialState.WAITING,
                params=run.source.params,
                distributions=run.source.distributions,
                user_attrs={
                    "source_study": study.user_attrs.get("source_study"),
                    "source_trial": run.source.number,
                    "seed": run.seed,
                    "config": run.config,
                    RERUN_CONFIG: run.config,
                },
            )
        )
        added += 1
    return added


def drop_others(study: optuna.Study, runs: list[Run]) -> int:
    """Fail the WAITING runs that ``runs`` does not ask for (an earlier promote with other --top, --seeds
    or --set), so the engine does not spend time on them; how many."""
    stale = [t for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)) if not any(r.matches(t) for r in runs)]
    return sum(end_trial(study, t, TrialState.FAIL, "dropped: not asked for by the latest promote/audit") for t in stale)


def rerun_spec(spec: Spec, study_name: str, runs: int) -> Spec:
    """The spec the engine runs a re-run study with: the same objective, space and resources; the
    study's storage made explicit (a default sqlite path depends on the study name); no pruner, no
    warm starts; ``runs`` trials (the budget only counts: the claim loop takes WAITING trials)."""
    return spec.model_copy(
        update={
            "study": study_name,
            "storage": spec.storage.model_copy(update={"url": spec.storage_url}),  # the outage limit kept
            "backend": "optuna",  # fixed configs need no scheduler: a Ray study's re-runs use the embedded engine
            "pruner": PrunerSpec(name="none"),
            "sampler": SamplerSpec(name="random", seed=spec.sampler.seed),  # never consulted for a value: every param is queued
            "budget": Budget(trials=max(1, runs), timeout=None, max_failures=spec.budget.max_failures),
            "warm_start": type(spec.warm_start)(),  # none: a re-run study holds queued runs only
        }
    )


def planned(study: optuna.Study) -> int:
    """Runs that count towards a re-run study's budget: finished, running and waiting ones."""
    n = count_states(study)
    return sum(n.get(s, 0) for s in QUEUED)


def nothing_left(study: optuna.Study) -> bool:
    """A re-run study's workers stop when no run waits and none runs (a running one may die and be queued again)."""
    n = count_states(study)
    return not n.get(TrialState.WAITING) and not n.get(TrialState.RUNNING)


def joined(spec: Spec) -> Spec:
    """``hpsearch worker SPEC --study NAME-promote``: a re-run study is worked as promote/audit work it
    (no pruner, its queued runs only); any other study is returned unchanged."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(spec.storage_url, outage_s=spec.storage.outage_s)
    if spec.study not in optuna.get_all_study_names(storage):
        return spec
    study = optuna.load_study(study_name=spec.study, storage=storage)
    if not is_reruns(study):
        return spec
    return rerun_spec(spec, spec.study, planned(study))
