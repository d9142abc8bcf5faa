"""The embedded backend: an Optuna study in the spec's storage, trials run in this process."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from hpsearch.errors import UserError
from hpsearch.progress import Progress
from hpsearch.reporter import PruneHook, Reporter
from hpsearch.spec import Spec
from hpsearch.storage import GRACE_S, HEARTBEAT_S, HeartbeatStorage, backend_storage, open_storage, redact
from hpsearch.trial import FAILED, PRUNED, Outcome, run_trial

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


class TrialFailed(Exception):
    """Raised inside study.optimize so Optuna records FAIL; the reason is already stored."""


@dataclass
class Summary:
    study: str
    storage: str
    finished: int  # completed + pruned, all invocations
    pruned: int
    failed: int
    ran: int  # trials started by this invocation
    best: str
    stopped_early: str | None = None  # why the study stopped before its budget, if it did


# ---------------------------------------------------------------------------- samplers & pruners


def sampler_name(spec: Spec) -> str:
    return spec.sampler.name or ("nsga2" if len(spec.metrics) > 1 else "tpe")


def build_sampler(spec: Spec, offset: int = 0) -> optuna.samplers.BaseSampler:
    """``offset`` shifts the seed on resume, so a resumed study does not replay its first samples."""
    s = spec.sampler
    seed = None if s.seed is None else s.seed + offset
    startup = {} if s.startup_trials is None else {"n_startup_trials": s.startup_trials}
    builders = {
        "tpe": lambda: optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, **startup),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed),
        "grid": lambda: optuna.samplers.GridSampler(spec.tree.grid() or {}, seed=seed),
        "cmaes": lambda: optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False, **startup),
        "qmc": lambda: optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False),
        "gp": lambda: optuna.samplers.GPSampler(seed=seed, **startup),
        "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=seed, population_size=s.population_size or 50),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return builders[sampler_name(spec)]()


def build_pruner(spec: Spec) -> optuna.pruners.BasePruner:
    p = spec.pruner
    # Optuna may prune at step >= n_warmup_steps; epochs are 1-based and warmup epochs are never pruned.
    common = {"n_startup_trials": p.startup_trials, "n_warmup_steps": p.warmup_epochs + 1, "interval_steps": p.interval_epochs}
    max_epochs = p.max_epochs or spec.fixed.get("epochs") or "auto"
    builders = {
        "median": lambda: optuna.pruners.MedianPruner(**common),
        "percentile": lambda: optuna.pruners.PercentilePruner(p.percentile, **common),
        "successive_halving": lambda: optuna.pruners.SuccessiveHalvingPruner(
            min_resource=max(1, p.warmup_epochs), reduction_factor=p.reduction_factor or 4
        ),
        "hyperband": lambda: optuna.pruners.HyperbandPruner(
            min_resource=max(1, p.warmup_epochs), max_resource=max_epochs, reduction_factor=p.reduction_factor or 3
        ),
        "none": lambda: optuna.pruners.NopPruner(),
    }
    return builders[p.name]()


# ---------------------------------------------------------------------------- study


def open_study(spec: Spec, create: bool = True, heartbeat: bool = True, seed_salt: int = 0) -> optuna.Study:
    """Create the study or load it (resume); warm starts are enqueued only on creation.

    ``seed_salt`` tells processes sharing one study apart: with the same seed they would all
    draw the same random start-up configs."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(spec.storage_url, create=create, heartbeat=heartbeat)
    existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    if spec.study not in existing and not create:
        raise UserError(f"storage {redact(spec.storage_url)}: no study named {spec.study!r} (found: {', '.join(existing) or 'none'})")
    offset = existing[spec.study].n_trials if spec.study in existing else 0
    study = optuna.create_study(
        storage=storage,
        sampler=build_sampler(spec, offset + seed_salt),
        pruner=build_pruner(spec),
        study_name=spec.study,
        directions=spec.directions,
        load_if_exists=True,
    )
    wanted = [optuna.study.StudyDirection[d.upper()] for d in spec.directions]
    if list(study.directions) != wanted:
        got = [d.name.lower() for d in study.directions]
        raise UserError(f"{spec.path}: direction: the stored study {spec.study!r} has directions {got}, the spec says {spec.directions}")
    if spec.study not in existing:
        study.set_user_attr("metric_names", spec.metrics)
        with warnings.catch_warnings():  # experimental in Optuna: its warning would reach the user's stderr
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(spec.metrics)  # optuna-dashboard labels objectives with these
        study.set_user_attr("objective", spec.objective)
        for config in spec.warm_start:
            study.enqueue_trial(spec.tree.params_from_config({**spec.fixed, **config}), user_attrs={"warm_start": True})
    return study


# ---------------------------------------------------------------------------- run


def run(spec: Spec, quiet: bool = False) -> Summary:
    """Run the study until ``budget.trials`` trials have finished (completed or pruned).

    One slot runs trials in this process; several (--workers, GPUs) run as processes. Either
    way each trial is claimed under the study's lock (workers.py), so the budget ends exactly
    even when other processes or machines work on the same study."""
    from hpsearch import workers

    return workers.run_worker(spec, quiet)


def announce(progress: Progress, spec: Spec, done: int, where: str = "") -> bool:
    """The run's first line; False (and a line saying so) when the budget is already spent."""
    if done >= spec.budget.trials:
        progress.print(f"{spec.study}: budget reached ({done}/{spec.budget.trials} trials finished); raise budget.trials to continue")
        return False
    progress.print(
        f"{spec.study}: {'resuming at' if done else 'starting'} {done}/{spec.budget.trials} trials{where}, "
        f"sampler {sampler_name(spec)}, pruner {spec.pruner.name}, storage {redact(spec.storage_url)}"
    )
    return True


def fail_stale_trials(study: optuna.Study) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def settle_silent(study: optuna.Study, progress: Progress) -> None:
    """Trials left RUNNING by a process that died: wait out the heartbeat grace period, then fail them
    (reason "failed: process died ...") and queue their configs again, so they run first."""
    storage = backend_storage(study)
    if not isinstance(storage, HeartbeatStorage):
        fail_stale_trials(study)
        return
    silent = storage.silent_trials(study._study_id, 2 * HEARTBEAT_S)  # live processes beat every HEARTBEAT_S
    if silent:
        numbers = sorted(storage.get_trial(i).number for i in silent)
        wait = max(0.0, GRACE_S - min(silent.values())) + 1
        progress.print(f"trial(s) {', '.join(map(str, numbers))} RUNNING without a heartbeat (their process died?): "
                       f"failing them and retrying their configs in {wait:.0f} s")
    deadline = time.monotonic() + GRACE_S + 2
    while True:
        fail_stale_trials(study)
        left = set(silent) & set(storage.silent_trials(study._study_id, 2 * HEARTBEAT_S))
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def trial_function(spec: Spec, objective: Any, progress: Progress) -> Any:
    """The trial body: sample, run the objective, record; raises TrialPruned / TrialFailed like study.optimize expects."""

    def fn(trial: optuna.Trial) -> float | list[float]:
        config = spec.config_for(spec.tree.suggest(trial))
        trial.set_user_attr("config", config)
        reporter = Reporter(
            trial_dir=spec.study_dir / f"trial-{trial.number}",
            prune_hook=prune_hook(trial, spec),
            on_epoch=lambda epoch, metrics: progress.epoch(trial.number, epoch, config.get("epochs"), metrics),
        )
        try:
            outcome = run_trial(objective, config, reporter, spec.metrics)
        except KeyboardInterrupt:
            trial.set_user_attr("reason", "interrupted")
            raise
        record(trial, outcome, reporter)
        reporter.close(hparams=outcome.config or config, final=outcome.metrics)
        if outcome.state == PRUNED:
            raise optuna.TrialPruned(outcome.reason)
        if outcome.state == FAILED:
            raise TrialFailed(outcome.reason)
        assert outcome.values is not None
        return outcome.values[0] if len(outcome.values) == 1 else outcome.values

    return fn


def prune_hook(trial: optuna.Trial, spec: Spec) -> PruneHook | None:
    """Report the first metric per epoch; Optuna cannot prune multi-objective studies."""
    if len(spec.metrics) > 1:
        return None
    metric = spec.metrics[0]

    def hook(epoch: int, metrics: dict[str, float]) -> bool:
        if metric not in metrics:
            return False
        trial.report(metrics[metric], step=epoch)
        return trial.should_prune()

    return hook


def record(trial: optuna.Trial, outcome: Outcome, reporter: Reporter) -> None:
    attrs = {**outcome.attrs(), "history": reporter.history}
    storage = backend_storage(trial.study)
    if isinstance(storage, HeartbeatStorage):
        storage.set_trial_user_attrs(trial._trial_id, attrs)  # one commit, not one per key
        return
    for key, value in attrs.items():
        trial.set_user_attr(key, value)


def trial_value_text(trial: optuna.trial.FrozenTrial, spec: Spec) -> str:
    if trial.state != TrialState.COMPLETE or trial.values is None:
        return "-"
    return ", ".join(f"{m}={v:.4g}" for m, v in zip(spec.metrics, trial.values))


def best_text(study: optuna.Study, spec: Spec, trials: list[optuna.trial.FrozenTrial] | None = None) -> str:
    """``trials``: the study's trials when the caller has read them already (one storage read per trial, not three)."""
    if trials is None:
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    completed = [t for t in trials if t.state == TrialState.COMPLETE]
    if not completed:
        return "-"
    if len(spec.metrics) > 1:
        return f"{len(study.best_trials)} Pareto-optimal trials"
    pick = max if spec.directions[0] == "maximize" else min
    best = pick(completed, key=lambda t: t.value)
    return f"{spec.metrics[0]}={best.value:.4g} (trial {best.number})"
