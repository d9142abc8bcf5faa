"""Search methods, all driven the same way: ask a config, run its epochs one by one against the
budget, report each epoch, stop it when the method says so, tell the outcome.

A method is ``(task, budget in epochs, seed) -> Trace``. The search stops the moment it has
spent the budget: a trial still running then is cut off and never completes. The incumbent is
the completed (full max_epochs) trial with the best observed final value, scored on the task's
noise-free ``true_value``. ``sampler_s`` counts only the method's own code (ask, tell, report,
the pruning decision), not the task.
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


Method = Callable[[Task, int, int], Trace]


class Incumbent:
    def __init__(self, task: Task) -> None:
        self.task, self.sign = task, (1.0 if task.direction == "maximize" else -1.0)
        self.observed, self.true = -math.inf, math.nan

    def offer(self, config: dict[str, Any], observed: float) -> None:
        if math.isfinite(observed) and self.sign * observed > self.observed:
            observed_only = getattr(self.task, "observed_only", False)  # Tier C: no noise-free value to score on
            self.observed, self.true = self.sign * observed, observed if observed_only else self.task.true_value(config)


def _quiet_optuna() -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def optuna_search(task: Task, budget: int, seed: int, sampler: Any, pruner: Any, study: Any = None) -> Trace:
    """The ask/tell loop every Optuna-based method shares (hpsearch's defaults included); on
    ``study`` when given (its own sampler and pruner), else on a new in-memory one."""
    optuna = _quiet_optuna()
    from hpsearch.spec.space import parse_space

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
        elif state == "pruned":
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        own += clock() - t
        if state == "cut":
            break
        trace.spent.append(spent)
        trace.incumbent.append(best.true)
        trace.pruned.append(trace.pruned_epochs)
    trace.sampler_s = own
    return trace


# ---------------------------------------------------------------------------- the methods


def random_search(task: Task, budget: int, seed: int) -> Trace:
    optuna = _quiet_optuna()
    return optuna_search(task, budget, seed, optuna.samplers.RandomSampler(seed=seed), optuna.pruners.NopPruner())


def sobol(task: Task, budget: int, seed: int) -> Trace:
    optuna = _quiet_optuna()
    sampler = optuna.samplers.QMCSampler(qmc_type="sobol", scramble=True, seed=seed, warn_independent_sampling=False)
    return optuna_search(task, budget, seed, sampler, optuna.pruners.NopPruner())


def optuna_default(task: Task, budget: int, seed: int) -> Trace:
    """What a user gets from ``optuna.create_study(pruner=MedianPruner())``: TPE with its 10
    random start-up trials, the median pruner with its defaults (5 start-up trials, no warmup)."""
    optuna = _quiet_optuna()
    return optuna_search(task, budget, seed, optuna.samplers.TPESampler(seed=seed), optuna.pruners.MedianPruner())


def tpe_hyperband(task: Task, budget: int, seed: int) -> Trace:
    """The issue's anchor: TPE with 3 start-up trials plus Hyperband from 1 epoch."""
    optuna = _quiet_optuna()
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=3)
    pruner = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=task.max_epochs, reduction_factor=3)
    return optuna_search(task, budget, seed, sampler, pruner)


def _second_attempt(pruner: str, startup: int | None = None, **tpe: Any) -> Method:
    """A variant of the second attempt at the defaults (seeds 0-59, not shipped): hpsearch's
    budget-aware start-up (or ``startup`` trials) with another TPE setting or pruner, as plain
    Optuna objects."""

    def method(task: Task, budget: int, seed: int) -> Trace:
        from hpsearch.spec.defaults import startup_trials

        optuna = _quiet_optuna()
        n = startup if startup is not None else startup_trials(hpsearch_spec(task, budget, seed)).value
        options = {"multivariate": True, "group": True} | tpe
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n, **options)
        pruners = {
            "hyperband": lambda: optuna.pruners.HyperbandPruner(min_resource=1, max_resource=task.max_epochs, reduction_factor=3),
            "hyperband_rf2": lambda: optuna.pruners.HyperbandPruner(min_resource=1, max_resource=task.max_epochs, reduction_factor=2),
            "sh_min2": lambda: optuna.pruners.SuccessiveHalvingPruner(min_resource=2, reduction_factor=3),
            "median": lambda: optuna.pruners.MedianPruner(),  # Optuna's defaults: may prune from epoch 1
            "median_w1": lambda: optuna.pruners.MedianPruner(n_warmup_steps=2),  # hpsearch's: epoch 1 never pruned
        }
        return optuna_search(task, budget, seed, sampler, pruners[pruner]())

    return method


SECOND_ATTEMPT: dict[str, Method] = {
    "tpe_ei64": _second_attempt("hyperband", n_ei_candidates=64),
    "tpe_univariate": _second_attempt("hyperband", multivariate=False, group=False),  # independent TPE (Optuna 5: multivariate by default)
    "tpe_sh_min2": _second_attempt("sh_min2"),
    "tpe_hb_rf2": _second_attempt("hyperband_rf2"),
}

# The third attempt (2026-12-04, calibration seeds): Optuna's defaults (10 start-up trials, so not
# budget-aware) with one of hpsearch's choices each. Optuna 5's TPESampler is already multivariate
# for one objective, so ``t3_group`` differs from Optuna's defaults only by group=True (the same
# search on a space without conditional options); ``t3_univariate_w1`` is independent TPE with a
# median pruner that never prunes at epoch 1 (hpsearch's median setting).
THIRD_ATTEMPT: dict[str, Method] = {
    "t3_group": _second_attempt("median", startup=10),
    "t3_univariate_w1": _second_attempt("median_w1", startup=10, multivariate=False, group=False),
}


def hpsearch_spec(task: Task, budget: int, seed: int, **overrides: Any) -> Any:
    """The Spec a user would write for this task: the space, the budget as full trials, the
    epochs as fixed.epochs; sampler and pruner left to hpsearch's defaults (or ``overrides``)."""
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
    for key in ("pruner", "warm_start"):
        if key in overrides:
            raw[key] = overrides[key]
    from hpsearch.spec.space import parse_space

    spec = Spec.model_validate(raw)
    spec._tree = parse_space(task.space, "space", [])  # what load_spec sets (the warm start reads it)
    return spec


def hpsearch_defaults(task: Task, budget: int, seed: int, **overrides: Any) -> Trace:
    """hpsearch's shipped defaults, built by the code path ``hpsearch run`` uses (registry builders
    from a Spec), not re-implemented here."""
    from hpsearch.study.open import build_pruner, build_sampler

    spec = hpsearch_spec(task, budget, seed, **overrides)
    _quiet_optuna()
    return optuna_search(task, budget, seed, build_sampler(spec), build_pruner(spec))


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

    def true_value(self, config: dict[str, Any]) -> float:
        return self.task.true_value(config)


def hpsearch_warm(task: Task, budget: int, seed: int) -> Trace:
    """hpsearch's warm start as a user sets it up (``warm_start: {study, storage, top: 2}``, built
    by ``open_study``): a source study of 2-epoch trials (SOURCE_EPOCHS epochs, a SQLite file),
    then hpsearch's defaults warm-started from it on what is left of ``budget``. The source's
    epochs come first on the trace: its cost is counted, and its 2-epoch values never make an
    incumbent."""
    import contextlib
    import io
    import tempfile

    import optuna

    from hpsearch.study.open import build_pruner, build_sampler, open_study

    _quiet_optuna()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/source.db"
        cheap = Fidelity(task, SOURCE_FIDELITY)
        source_spec = hpsearch_spec(cheap, SOURCE_EPOCHS, seed + 1_000_003)  # type: ignore[arg-type]
        source = optuna.create_study(
            storage=url, study_name="source", direction=task.direction, sampler=build_sampler(source_spec), pruner=build_pruner(source_spec)
        )
        optuna_search(cheap, SOURCE_EPOCHS, seed + 1_000_003, None, None, study=source)  # type: ignore[arg-type]
        spec = hpsearch_spec(task, budget - SOURCE_EPOCHS, seed, warm_start={"study": "source", "storage": url, "top": 2})
        with contextlib.redirect_stdout(io.StringIO()):  # its "imported N trials" line, once per search
            study = open_study(spec, storage=optuna.storages.InMemoryStorage())
        trace = optuna_search(task, budget - SOURCE_EPOCHS, seed, None, None, study=study)
    trace.spent = [SOURCE_EPOCHS + s for s in trace.spent]
    return trace


# The variants the budget-aware defaults were chosen from (Tier A, seeds 0-39): each is hpsearch
# with these spec keys set; "hpsearch" above is the shipped default with none set.
CANDIDATES: dict[str, dict[str, Any]] = {
    "hp_hb_k3": {"sampler": {"startup_trials": 3}, "pruner": {"name": "hyperband"}},
    "hp_hb_k10": {"sampler": {"startup_trials": 10}, "pruner": {"name": "hyperband"}},
    "hp_sh": {"pruner": {"name": "successive_halving", "reduction_factor": 3}},
    "hp_median": {"pruner": {"name": "median"}},
    "hp_median_k10": {"sampler": {"startup_trials": 10}, "pruner": {"name": "median"}},
    "hp_none": {"pruner": {"name": "none"}},
    "hp_hb_min2": {"pruner": {"name": "hyperband", "warmup_epochs": 2}},
    "hp_hb_min3": {"pruner": {"name": "hyperband", "warmup_epochs": 3}},
    "hp_median_w3": {"pruner": {"name": "median", "warmup_epochs": 3, "startup_trials": 3}},
    "hp_median_w2": {"pruner": {"name": "median", "warmup_epochs": 2, "startup_trials": 3}},
}


def _candidate(overrides: dict[str, Any]) -> Method:
    return lambda task, budget, seed: hpsearch_defaults(task, budget, seed, **overrides)


METHODS: dict[str, Method] = {
    "random": random_search,
    "sobol": sobol,
    "optuna_default": optuna_default,
    "tpe_hyperband": tpe_hyperband,
    "hpsearch": hpsearch_defaults,
    "hpsearch_warm": hpsearch_warm,
}


METHODS.update({name: _candidate(o) for name, o in CANDIDATES.items()})
METHODS.update(SECOND_ATTEMPT)
METHODS.update(THIRD_ATTEMPT)


def _register_optional() -> None:
    from bench.quality import peers, ray_methods

    METHODS.update(peers.available())
    METHODS.update(ray_methods.available())


_register_optional()
