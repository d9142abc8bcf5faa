"""Ray Tune's trial schedulers as search methods: ASHA as Ray Tune ships it, and what hpsearch's
Ray backend (``backend: ray``) runs by default.

A whole Tune run per search (``ray.init``, an actor per trial, a results folder) costs seconds
of start-up and would measure Ray's overhead, not its search. So Ray's own scheduler object
makes the stopping decisions inside the shared ask/tell loop (``methods.optuna_search``): after
each epoch it gets the result Tune would hand it (``on_trial_result`` with the epoch and the
metric) and a STOP prunes the trial there. Trials run one at a time, as Tune runs them with one
worker, so ASHA's rungs fill in trial order. A trial that has run all ``max_epochs`` epochs is
complete whatever the scheduler says (Ray's ``stop_last_trials`` only ends it at its last epoch).

Ray's BOHB, run the same way under a stand-in for Tune's controller, was a peer until 2026-12-06:
docs/experiments/2026-12-ray-bohb.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.quality.methods import Trace, hpsearch_spec, optuna_search, quiet_optuna
from bench.quality.tasks import Task

METRIC = "value"  # the metric key of the results the scheduler reads; the epoch is the time attribute


@dataclass(frozen=True)
class _RayTrial:
    trial_id: str  # all Ray's ASHA bookkeeping reads of a trial


def scheduler_pruner(scheduler: Any, max_epochs: int) -> Any:
    """An Optuna pruner that asks a Ray Tune scheduler, after each reported epoch, whether to stop."""
    import optuna
    from ray.tune.schedulers import TrialScheduler

    class RaySchedulerPruner(optuna.pruners.BasePruner):
        def __init__(self) -> None:
            self.added: set[int] = set()

        def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
            epoch = trial.last_step
            if epoch is None:
                return False
            handle = _RayTrial(str(trial.number))
            if trial.number not in self.added:
                self.added.add(trial.number)
                scheduler.on_trial_add(None, handle)
            result = {"epoch": epoch, "training_iteration": epoch, METRIC: trial.intermediate_values[epoch]}
            return bool(scheduler.on_trial_result(None, handle, result) == TrialScheduler.STOP and epoch < max_epochs)

    return RaySchedulerPruner()


def ray_asha(task: Task, budget: int, seed: int) -> Trace:
    """``ASHAScheduler()`` with Ray's defaults (grace period 1 epoch, reduction factor 4, one
    bracket) over Tune's default search, a uniform random draw per trial (through hpsearch's
    space, as ``random`` draws it: Tune's own search spaces have no conditional options)."""
    import optuna
    from ray.tune.schedulers import ASHAScheduler

    quiet_optuna()
    mode = "max" if task.direction == "maximize" else "min"
    scheduler = ASHAScheduler(time_attr="epoch", metric=METRIC, mode=mode, max_t=task.max_epochs)
    sampler = optuna.samplers.RandomSampler(seed=seed)
    return optuna_search(task, budget, seed, sampler, scheduler_pruner(scheduler, task.max_epochs))


def hpsearch_ray(task: Task, budget: int, seed: int) -> Trace:
    """hpsearch with ``backend: ray`` and nothing else set: the spec's sampler (``build_sampler``,
    budget-aware start-up) and the scheduler ``hpsearch.engine.ray.search.build_scheduler`` builds from
    the spec (ASHA: grace ``pruner.warmup_epochs`` + 1 = 2 epochs, reduction factor 3)."""
    from hpsearch.engine.ray.search import build_scheduler
    from hpsearch.study.open import build_sampler

    spec = hpsearch_spec(task, budget, seed).model_copy(update={"backend": "ray"})
    quiet_optuna()
    return optuna_search(task, budget, seed, build_sampler(spec), scheduler_pruner(build_scheduler(spec), task.max_epochs))
