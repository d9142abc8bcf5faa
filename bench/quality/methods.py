"""Search methods, all driven the same way: ask a config, run its epochs one by one against the
budget, report each epoch, stop it when the method says so, tell the outcome.

A method is ``(task, budget in epochs, seed) -> Trace``. The search stops the moment it has
spent the budget: a trial still running then is cut off and never completes. The incumbent is
the completed (full max_epochs) trial with the best observed final value, scored on the task's
noise-free ``true_value``. ``sampler_s`` counts only the method's own code (ask, tell, report,
the pruning decision), not the task.

This module holds the loop, Optuna's methods and hpsearch's; the peers (peers.py, ray_methods.py)
build on its Trace and Incumbent, and registry.py names every method. It knows no peer.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.quality.tasks import Task


@dataclass
class Trace:
    spent: list[int] = field(default_factory=list)  # cumulative epochs after each finished trial
    incumbent: list[float] = field(default_factory=list)  # true value of the incumbent then (nan before one completed)
    pruned_epochs: int = 0
    pruned: list[int] = field(default_factory=list)  # cumulative pruned_epochs after each finished trial (read at any budget)
    trials: int = 0
    sampler_s: float = 0.0
    cpu_s: float = 0.0  # the whole search's CPU time, task included (the harness measures it)

    def record(self, spent: int, incumbent: float) -> None:
        """A trial finished with ``spent`` epochs spent in all."""
        self.spent.append(spent)
        self.incumbent.append(incumbent)
        self.pruned.append(self.pruned_epochs)


Method = Callable[[Task, int, int], Trace]


class Incumbent:
    def __init__(self, task: Task) -> None:
        self.task, self.sign = task, (1.0 if task.direction == "maximize" else -1.0)
        self.observed, self.true = -math.inf, math.nan

    def offer(self, config: dict[str, Any], observed: float) -> None:
        if math.isfinite(observed) and self.sign * observed > self.observed:
            observed_only = getattr(self.task, "observed_only", False)  # Tier C: no noise-free value to score on
            self.observed, self.true = self.sign * observed, observed if observed_only else self.task.true_value(config)


def quiet_optuna() -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def optuna_search(task: Task, budget: int, seed: int, sampler: Any, pruner: Any, study: Any = None, pick: Any = None) -> Trace:
    """The ask/tell loop every Optuna-based method shares (hpsearch's defaults included); on
    ``study`` when given (its own sampler and pruner), else on a new in-memory one. ``pick``:
    the method's own answer (``(study, tree) -> trial``), scored instead of the best observed."""
    optuna = quiet_optuna()
    from hpsearch.search.space import parse_space

    tree = parse_space(task.space, "space", [])
    clock = time.perf_counter
    t0 = clock()
    # a fixed name: Optuna's Hyperband pruner picks a trial's bracket from a hash of the study's
    # name, and a nameless study gets a random one (runs before 2026-12-04 had that randomness)
    name = f"{task.name}-{seed}"
    study = study or optuna.create_study(study_name=name, direction=task.direction, sampler=sampler, pruner=pruner)
    trace, best, spent = Trace(), Incumbent(task), 0
    own = clock() - t0
    while spent < budget:
        t = clock()
        trial = study.ask()
        config = tree.suggest(trial)
        own += clock() - t
        trace.trials += 1
        values = task.curve(config, task.max_epochs, seed * 100_003 + trace.trials)
        state = "complete"
        for epoch, value in enumerate(values, start=1):
            if spent >= budget:
                state = "cut"
                break
            spent += 1
            t = clock()
            trial.report(value, epoch)
            prune = trial.should_prune()
            own += clock() - t
            if prune:
                state = "pruned"
                trace.pruned_epochs += epoch
                break
        if hasattr(values, "close"):
            values.close()  # Tier C: stop the training where the method stopped listening
        t = clock()
        if state == "complete":
            study.tell(trial, values[-1])
            best.offer(config, values[-1])
            if pick is not None and not getattr(task, "observed_only", False):  # what the method returns, not the max it saw
                chosen = pick(study, tree)  # (Tier C has no noise-free value: every method is scored on its best observed)
                best.true = task.true_value(tree.config_from_params(chosen.params))
        elif state == "pruned":
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        own += clock() - t
        if state == "cut":
            break
        trace.record(spent, best.true)
    trace.sampler_s = own
    return trace


# ---------------------------------------------------------------------------- the methods


def random_search(task: Task, budget: int, seed: int) -> Trace:
    optuna = quiet_optuna()
    return optuna_search(task, budget, seed, optuna.samplers.RandomSampler(seed=seed), optuna.pruners.NopPruner())


def sobol(task: Task, budget: int, seed: int) -> Trace:
    optuna = quiet_optuna()
    sampler = optuna.samplers.QMCSampler(qmc_type="sobol", scramble=True, seed=seed, warn_independent_sampling=False)
    return optuna_search(task, budget, seed, sampler, optuna.pruners.NopPruner())


def optuna_default(task: Task, budget: int, seed: int) -> Trace:
    """What a user gets from ``optuna.create_study(pruner=MedianPruner())``: TPE with its 10
    random start-up trials, the median pruner with its defaults (5 start-up trials, no warmup)."""
    optuna = quiet_optuna()
    return optuna_search(task, budget, seed, optuna.samplers.TPESampler(seed=seed), optuna.pruners.MedianPruner())


def tpe_hyperband(task: Task, budget: int, seed: int) -> Trace:
    """The issue's anchor: TPE with 3 start-up trials plus Hyperband from 1 epoch."""
    optuna = quiet_optuna()
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=3)
    pruner = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=task.max_epochs, reduction_factor=3)
    return optuna_search(task, budget, seed, sampler, pruner)


def tpe_median(warmup_epochs: int = 0, **tpe: Any) -> Method:
    """TPE with Optuna's 10 random start-up trials (``tpe``: its other settings) and a median
    pruner that never prunes in the first ``warmup_epochs``: the third attempt's variants."""

    def method(task: Task, budget: int, seed: int) -> Trace:
        optuna = quiet_optuna()
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=10, **tpe)
        return optuna_search(task, budget, seed, sampler, optuna.pruners.MedianPruner(n_warmup_steps=warmup_epochs))

    return method


def hpsearch_spec(task: Task, budget: int, seed: int, **overrides: Any) -> Any:
    """The Spec a user would write for this task: the space, the budget as full trials, the
    epochs as fixed.epochs; sampler and pruner left to hpsearch's defaults (or ``overrides``)."""
    from hpsearch.search.space import parse_space
    from hpsearch.spec.loader import Spec

    raw: dict[str, Any] = {
        "study": "bench",
        "metric": "value",
        "direction": task.direction,
        "budget": {"trials": max(1, budget // task.max_epochs)},
        "sampler": {"seed": seed, **overrides.get("sampler", {})},
        "fixed": {"epochs": task.max_epochs},
        "space": task.space,
    }
    raw |= {key: overrides[key] for key in ("pruner", "warm_start") if key in overrides}
    spec = Spec.model_validate(raw)
    spec._tree = parse_space(task.space, "space", [])  # what load_spec sets (the warm start reads it)
    return spec


def startup_plan(task: Task, budget: int, **overrides: Any) -> tuple[Any, ...]:
    """What hpsearch sets from the budget: the sampler auto picks, its start-up trials and the pruner
    (budgets that resolve the same share one search)."""
    from hpsearch.spec.defaults import pruner_name, sampler_choice, startup_trials

    spec = hpsearch_spec(task, budget, 0, **overrides)
    return (sampler_choice(spec).value, startup_trials(spec).value, pruner_name(spec).value)


def hpsearch_defaults(task: Task, budget: int, seed: int, noise_aware: bool = True, **overrides: Any) -> Trace:
    """hpsearch's shipped defaults, built by the code path ``hpsearch run`` uses (registry builders
    from a Spec), not re-implemented here."""
    from hpsearch.search.incumbent import best
    from hpsearch.study.open import build_pruner, build_sampler

    spec = hpsearch_spec(task, budget, seed, **overrides)
    quiet_optuna()
    pick = partial_pick(best, task.direction == "maximize") if noise_aware else None
    return optuna_search(task, budget, seed, build_sampler(spec), build_pruner(spec), pick=pick)


def partial_pick(best: Any, maximize: bool) -> Any:
    """hpsearch's answer, as ``hpsearch best`` gives it: the noise-aware incumbent."""
    return lambda study, tree: best(study.get_trials(deepcopy=False), tree, maximize).trial


SOURCE_EPOCHS, SOURCE_FIDELITY = 24, 2  # the warm start's source: 12 trials of 2 epochs


@dataclass
class Fidelity:
    """A task cut to its first ``max_epochs`` epochs: a cheaper setting of the same space."""

    task: Task
    max_epochs: int

    def __getattr__(self, name: str) -> Any:
        return getattr(self.task, name)

    def curve(self, config: dict[str, Any], epochs: int, seed: int) -> list[float]:
        return list(self.task.curve(config, self.max_epochs, seed))[:epochs]


def hpsearch_warm(task: Task, budget: int, seed: int) -> Trace:
    """hpsearch's warm start as a user sets it up (``warm_start: {study, storage, top: 2}``, built
    by ``open_study``): a source study of 2-epoch trials (SOURCE_EPOCHS epochs, a SQLite file),
    then hpsearch's defaults warm-started from it on what is left of ``budget``. The source's
    epochs come first on the trace: its cost is counted, and its 2-epoch values never make an
    incumbent."""
    import contextlib
    import io
    import tempfile

    from hpsearch.study.open import build_pruner, build_sampler, open_study

    optuna = quiet_optuna()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/source.db"
        cheap = Fidelity(task, SOURCE_FIDELITY)
        source_spec = hpsearch_spec(cheap, SOURCE_EPOCHS, seed + 1_000_003)
        source = optuna.create_study(
            storage=url, study_name="source", direction=task.direction, sampler=build_sampler(source_spec), pruner=build_pruner(source_spec)
        )
        optuna_search(cheap, SOURCE_EPOCHS, seed + 1_000_003, None, None, study=source)
        spec = hpsearch_spec(task, budget - SOURCE_EPOCHS, seed, warm_start={"study": "source", "storage": url, "top": 2})
        with contextlib.redirect_stdout(io.StringIO()):  # its "imported N trials" line, once per search
            study = open_study(spec, storage=optuna.storages.InMemoryStorage())
        trace = optuna_search(task, budget - SOURCE_EPOCHS, seed, None, None, study=study)
    trace.spent = [SOURCE_EPOCHS + s for s in trace.spent]
    return trace


def warm_plan(task: Task, budget: int) -> tuple[Any, ...]:
    """hpsearch_warm's plan: its warm-started study's start-up trials, on what the source leaves."""
    return startup_plan(task, budget - SOURCE_EPOCHS)
