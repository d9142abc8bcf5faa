"""The embedded backend: an Optuna study in the spec's storage, trials run in this process."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from hpsearch.errors import UserError
from hpsearch.objective import load_objective
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


def count(study: optuna.Study, *states: TrialState) -> int:
    return len(study.get_trials(deepcopy=False, states=states))


# ---------------------------------------------------------------------------- run


def run(spec: Spec, quiet: bool = False) -> Summary:
    """Run the study until ``budget.trials`` trials have finished (completed or pruned)."""
    from hpsearch import workers

    # Several slots (--workers, GPUs): one process per slot, see workers.py.
    slots = workers.slots_for(spec)
    if not workers.in_process(slots, spec):
        return workers.run_slots(spec, slots, quiet)
    objective = load_objective(spec.objective, spec.base_dir)
    study = open_study(spec)
    spec.study_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(spec.study, spec.budget.trials, quiet=quiet)
    settle_silent(study, progress)  # a killed earlier run's trial: failed with a reason, its config queued again
    tracker = Tracker(study, spec, progress)
    remaining = spec.budget.trials - tracker.counts.done
    if remaining <= 0:
        progress.print(f"{spec.study}: budget reached ({tracker.counts.done}/{spec.budget.trials} trials finished); raise budget.trials to continue")
        return tracker.summary(0)
    progress.print(
        f"{spec.study}: {'resuming at' if tracker.counts.done else 'starting'} {tracker.counts.done}/{spec.budget.trials} trials, "
        f"sampler {sampler_name(spec)}, pruner {spec.pruner.name}, storage {redact(spec.storage_url)}"
    )
    fn, own = trial_function(spec, objective, progress, tracker), []

    def owned(trial: optuna.Trial) -> float | list[float]:
        own.append(trial._trial_id)
        return fn(trial)

    with progress:
        try:
            study.optimize(owned, timeout=spec.budget.timeout, catch=(TrialFailed,), callbacks=[tracker.after_trial])
        except KeyboardInterrupt:
            fail_running(study, own, "interrupted")
            raise
    return tracker.summary(tracker.ran)


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


def fail_running(study: optuna.Study, trial_ids: list[int], reason: str) -> None:
    """Ctrl-C can land outside the objective (sampling, storage writes): end what is still RUNNING."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None  # a second Ctrl-C must not cut this short
    try:
        for trial_id in trial_ids:
            if study._storage.get_trial(trial_id).state == TrialState.RUNNING:
                study._storage.set_trial_user_attr(trial_id, "reason", reason)
                study._storage.set_trial_state_values(trial_id, TrialState.FAIL)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def trial_function(spec: Spec, objective: Any, progress: Progress, tracker: Tracker) -> Any:
    def fn(trial: optuna.Trial) -> float | list[float]:
        tracker.started()
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


class Tracker:
    """Counts for the progress line; stops the study after too many failures in a row."""

    def __init__(self, study: optuna.Study, spec: Spec, progress: Progress):
        self.study, self.spec, self.progress = study, spec, progress
        self.counts = progress.counts
        self.counts.done = count(study, *FINISHED)
        self.counts.pruned = count(study, TrialState.PRUNED)
        self.counts.failed = count(study, TrialState.FAIL)
        self.counts.best = best_text(study, spec)
        self.ran = 0
        self.failures_in_a_row = 0
        self.stopped_early: str | None = None

    def started(self) -> None:
        self.ran += 1
        self.counts.running = 1
        self.progress.refresh()

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self.counts.running = 0
        trials = study.get_trials(deepcopy=False)  # from storage: other processes may share the study
        states = [t.state for t in trials]
        self.counts.done = sum(state in FINISHED for state in states)
        elsewhere = states.count(TrialState.RUNNING)  # this process's trial has ended: these run in other processes
        if trial.state in FINISHED:
            self.failures_in_a_row = 0
        if trial.state == TrialState.PRUNED:
            self.counts.pruned += 1
        if trial.state == TrialState.FAIL:
            self.counts.failed += 1
            self.failures_in_a_row += 1
        self.counts.best = best_text(study, self.spec, trials)
        value = trial_value_text(trial, self.spec)
        self.progress.trial(trial.number, trial.user_attrs.get("reason", trial.state.name.lower()), value, trial.params)
        limit = self.spec.budget.max_failures
        if self.counts.done + elsewhere >= self.spec.budget.trials:
            study.stop()
        elif limit is not None and self.failures_in_a_row >= limit:
            self.stopped_early = f"{self.failures_in_a_row} trials failed in a row (budget.max_failures={limit}); last: {trial.user_attrs.get('reason')}"
            study.stop()

    def summary(self, ran: int) -> Summary:
        c = self.counts
        return Summary(self.spec.study, redact(self.spec.storage_url), c.done, c.pruned, c.failed, ran, c.best, self.stopped_early)


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
