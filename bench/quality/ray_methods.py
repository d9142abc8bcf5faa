"""Ray Tune's trial schedulers as search methods: ASHA as Ray Tune ships it, what hpsearch's
Ray backend (``backend: ray``) runs by default, and BOHB (Ray's ``TuneBOHB`` searcher with its
``HyperBandForBOHB`` scheduler).

A whole Tune run per search (``ray.init``, an actor per trial, a results folder) costs seconds
of start-up and would measure Ray's overhead, not its search. So Ray's own scheduler object
makes the stopping decisions inside the shared ask/tell loop (``methods.optuna_search``): after
each epoch it gets the result Tune would hand it (``on_trial_result`` with the epoch and the
metric) and a STOP prunes the trial there. Trials run one at a time, as Tune runs them with one
worker, so ASHA's rungs fill in trial order. A trial that has run all ``max_epochs`` epochs is
complete whatever the scheduler says (Ray's ``stop_last_trials`` only ends it at its last epoch).

BOHB cannot sit in that loop: HyperBandForBOHB pauses a trial at a rung until its bracket has
filled, resumes the ones successive halving keeps, and is asked which trial runs next. A real
``tune.Tuner`` takes about 4 minutes a search here, so ``ray_bohb`` runs Ray's two objects under
``_BohbController``, a stand-in for the parts of Tune's controller they talk to (ray 2.60), at
about a second a search; every suggestion, pause, resume and stop is still Ray's. Checked call
for call against a real Tuner: docs/experiments/2026-12-ray-bohb.md. hpbandster 0.7.4 draws
from numpy's global random state, which ``ray_bohb`` seeds per search and restores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from bench.quality.methods import Incumbent, Trace, hpsearch_spec, optuna_search, quiet_optuna
from bench.quality.peers import configspace, flat_config
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


@dataclass(eq=False)  # hashed by identity, as Tune's Trial: the scheduler keys its brackets by trial
class _BohbTrial:
    """What HyperBandForBOHB reads of a Tune trial (id, status, is_saving), and how far it has run."""

    trial_id: str
    config: dict[str, Any]  # hpsearch's flat config
    seed: int  # the task's seed for this trial's curve
    status: str = "PENDING"  # Tune's Trial.PENDING / RUNNING / PAUSED / TERMINATED
    is_saving: bool = False
    epochs: int = 0  # trained so far
    curve: list[float] | None = None
    last_result: dict[str, Any] | None = None


class _BohbController:
    """The parts of Tune's TuneController (ray 2.60) that HyperBandForBOHB and TuneBOHB use, on one
    worker. ``step`` is one pass of TuneController.step: ask the searcher for a trial when none is
    pending (one ahead), stage the trial ``choose_trial_to_run`` picks, else the oldest pending
    one. The free worker starts the first staged trial (as in Tune, a new trial staged while
    another trains may run before trials a halving has just resumed)."""

    def __init__(self, scheduler: Any, searcher: Any, new_trial: Any, on_stop: Any) -> None:
        self.scheduler, self.search_alg = scheduler, SimpleNamespace(searcher=searcher)
        self.new_trial, self.on_stop = new_trial, on_stop
        self.trials: list[_BohbTrial] = []
        self.staged: list[_BohbTrial] = []  # actors requested, first come first served

    def get_trials(self) -> list[_BohbTrial]:
        return self.trials

    def step(self) -> None:
        if not any(t.status == "PENDING" for t in self.trials):
            trial = self.new_trial(f"{len(self.trials) + 1:05d}")
            self.trials.append(trial)
            self.scheduler.on_trial_add(self, trial)
        chosen = self.scheduler.choose_trial_to_run(self)
        if chosen is not None and chosen not in self.staged:
            chosen.status = "PENDING"  # a resumed trial waits for its actor as a pending one
            self.staged.append(chosen)
        for trial in self.trials:
            if trial.status == "PENDING" and trial not in self.staged and not self.staged:
                self.staged.append(trial)

    def start_next(self) -> _BohbTrial:
        self.step()  # the loop runs while the freed worker's next actor starts
        while not self.staged:
            self.step()
        trial = self.staged.pop(0)
        trial.status = "RUNNING"
        self.step()  # the loop goes on while the trial trains: the next trial is asked for and staged
        self.step()
        return trial

    def stop_trial(self, trial: _BohbTrial) -> None:
        """TuneController.stop_trial: a waiting trial leaves its bracket, the running one completes."""
        if trial.status == "TERMINATED":
            return
        if trial.status in ("PENDING", "PAUSED"):
            self.scheduler.on_trial_remove(self, trial)
            self.search_alg.searcher.on_trial_complete(trial.trial_id)
        else:
            self.scheduler.on_trial_complete(self, trial, trial.last_result)
            self.search_alg.searcher.on_trial_complete(trial.trial_id, result=trial.last_result)
        trial.status = "TERMINATED"
        self.on_stop(trial)


def ray_bohb(task: Task, budget: int, seed: int) -> Trace:
    """``TuneBOHB`` (hpbandster's BOHB, its defaults) with ``HyperBandForBOHB(max_t=max_epochs)``
    (reduction factor 3: brackets of 5 trials at 2 epochs, 2 kept to 6, and of 3 at 6), as Ray's
    docs combine them, on the task's space as a ConfigSpace (``peers``). A trial that reaches
    max_epochs is complete; one stopped earlier counts all its epochs as pruned."""
    import logging
    import warnings

    import numpy as np
    from ray.tune.schedulers import HyperBandForBOHB, TrialScheduler
    from ray.tune.search.bohb import TuneBOHB

    logging.getLogger("hpbandster").setLevel(logging.ERROR)  # "sampled vector has EI value nan": BOHB falls back itself
    tree, cs = configspace(task, seed)
    mode = "max" if task.direction == "maximize" else "min"
    trace, best, spent = Trace(), Incumbent(task), 0
    clock = time.perf_counter

    def new_trial(trial_id: str) -> _BohbTrial:
        return _BohbTrial(trial_id, flat_config(tree, searcher.suggest(trial_id) or {}), seed * 100_003 + int(trial_id))

    def on_stop(trial: _BohbTrial) -> None:
        if trial.epochs < task.max_epochs:
            trace.pruned_epochs += trial.epochs  # stopped before its last epoch: all it trained is pruned

    state = np.random.get_state()  # hpbandster samples from numpy's global generator
    np.random.seed(seed)
    with warnings.catch_warnings():
        # hpbandster 0.7.4 on ConfigSpace 1.2 / statsmodels 0.15: deprecated calls that still work,
        # and the KDE's divide-by-zero for a categorical with one level among the good configs
        for category in (DeprecationWarning, FutureWarning, RuntimeWarning):
            warnings.simplefilter("ignore", category)
        t0 = clock()
        searcher = TuneBOHB(space=cs, metric=METRIC, mode=mode, seed=seed)
        scheduler: Any = HyperBandForBOHB(time_attr="epoch", metric=METRIC, mode=mode, max_t=task.max_epochs)  # typed for Tune's
        ctl = _BohbController(scheduler, searcher, new_trial, on_stop)
        own = clock() - t0
        try:
            while spent < budget:
                t = clock()
                trial = ctl.start_next()
                own += clock() - t
                if trial.curve is None:
                    trial.curve = list(task.curve(trial.config, task.max_epochs, trial.seed))
                    trace.trials += 1
                start, decision = trial.epochs, TrialScheduler.CONTINUE
                while decision == TrialScheduler.CONTINUE and trial.epochs < task.max_epochs and spent < budget:
                    trial.epochs += 1
                    spent += 1
                    value = trial.curve[trial.epochs - 1]
                    result = {"epoch": trial.epochs, "training_iteration": trial.epochs, METRIC: value}
                    t = clock()
                    decision = scheduler.on_trial_result(ctl, trial, result)
                    if decision != TrialScheduler.STOP:  # TuneController hands the searcher only these
                        searcher.on_trial_result(trial.trial_id, result)
                    trial.last_result = result
                    own += clock() - t
                    if trial.epochs == task.max_epochs:
                        best.offer(trial.config, value)  # complete, whatever the scheduler says next
                if decision == TrialScheduler.CONTINUE and trial.epochs < task.max_epochs:
                    break  # cut off by the budget mid-run
                t = clock()
                if decision == TrialScheduler.PAUSE:
                    trial.status = "PAUSED"
                else:  # STOP, or its training function returned after the last epoch
                    ctl.stop_trial(trial)
                own += clock() - t
                if trial.epochs > start:
                    trace.record(spent, best.true)
        finally:
            np.random.set_state(state)
    trace.sampler_s = own
    return trace
