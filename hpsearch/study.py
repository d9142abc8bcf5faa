"""The study both engines share: open it, count it, describe it, record a trial's outcome."""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.errors import UserError
from hpsearch.registry import PRUNERS, SAMPLERS, sampler_name
from hpsearch.storage import (
    cannot_open,
    count_states,
    engine_url,
    open_storage,
    redact,
    set_attrs,
    sqlite_path,
)

if TYPE_CHECKING:
    from hpsearch.progress import Progress
    from hpsearch.reporter import Reporter
    from hpsearch.spec import Spec
    from hpsearch.trial import Outcome

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)  # trials that spend the budget
CLAIMED = (TrialState.RUNNING, *FINISHED)  # trials that hold a share of it


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


def build_sampler(spec: Spec, offset: int = 0) -> optuna.samplers.BaseSampler:
    """``offset`` shifts the seed (resume, other processes), so they do not replay the same samples."""
    seed = None if spec.sampler.seed is None else spec.sampler.seed + offset
    return SAMPLERS[sampler_name(spec)].build(spec, seed)


def build_pruner(spec: Spec) -> optuna.pruners.BasePruner:
    return PRUNERS[spec.pruner.name].build(spec)


def open_study(spec: Spec, seed_salt: int = 0, storage: Any = None) -> optuna.Study:
    """Create the study or load it (resume); warm starts are enqueued only on creation.

    ``seed_salt`` tells processes sharing one study apart: with the same seed they would all
    draw the same random start-up configs."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = storage or open_storage(spec.storage_url)
    existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
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


# ---------------------------------------------------------------------------- the claim lock


class ClaimLock:
    """Makes "count the claimed trials, then create one" atomic across every process on a study."""

    def __init__(self, url: str, study: str):
        self.url, self.study = url, study
        self.path = sqlite_path(url)
        self.dialect = url.split(":", 1)[0].split("+", 1)[0]
        if self.path is None and self.dialect not in ("postgresql", "postgres"):
            raise UserError(f"storage: cannot open {redact(url)}: hpsearch stores studies in sqlite:///PATH or postgresql://USER:PW@HOST/DB")
        self._engine: Any = None
        # PostgreSQL advisory locks take a 64-bit key; one per study name.
        self.key = int.from_bytes(hashlib.blake2b(f"hpsearch:{study}".encode(), digest_size=8).digest(), "big", signed=True)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if self.path is not None:
            with self._file_lock():
                yield
        else:
            with self._advisory_lock():
                yield

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        import fcntl

        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.path}.claims.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released by the kernel if this process dies
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _advisory_lock(self) -> Iterator[None]:
        import sqlalchemy

        if self._engine is None:
            self._engine = sqlalchemy.create_engine(engine_url(self.url), pool_size=1, pool_pre_ping=True)
        try:
            connection = self._engine.connect()
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise cannot_open(self.url, exc) from None
        with connection as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": self.key})  # released if the connection drops
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})


# ---------------------------------------------------------------------------- what the user reads


def announce(progress: Progress, spec: Spec, done: int, where: str = "", engine: str = "") -> bool:
    """The run's first line; False (and a line saying so) when the budget is already spent."""
    if budget_spent(progress, spec, done):
        return False
    how = engine or f"sampler {sampler_name(spec)}, pruner {spec.pruner.name}"
    progress.print(
        f"{spec.study}: {'resuming at' if done else 'starting'} {done}/{spec.budget.trials} trials{where}, "
        f"{how}, storage {redact(spec.storage_url)}"
    )
    return True


def budget_spent(progress: Progress, spec: Spec, done: int) -> bool:
    if done < spec.budget.trials:
        return False
    progress.print(f"{spec.study}: budget reached ({done}/{spec.budget.trials} trials finished); raise budget.trials to continue")
    return True


def refresh(progress: Progress, study: optuna.Study, spec: Spec, best: bool = True) -> None:
    """The live line's counts and (``best``: when it may have changed) best, from small queries, not a read of every trial."""
    n = count_states(study)
    c = progress.counts
    c.done = sum(n.get(s, 0) for s in FINISHED)
    c.pruned = n.get(TrialState.PRUNED, 0)
    c.failed = n.get(TrialState.FAIL, 0)
    c.running = n.get(TrialState.RUNNING, 0)
    if best:
        c.best = best_text(study, spec) if n.get(TrialState.COMPLETE) else "-"
    progress.refresh()


def finished_count(study: optuna.Study) -> int:
    n = count_states(study)
    return sum(n.get(s, 0) for s in FINISHED)


def trial_value_text(trial: FrozenTrial, spec: Spec) -> str:
    if trial.state != TrialState.COMPLETE or trial.values is None:
        return "-"
    return ", ".join(f"{m}={v:.4g}" for m, v in zip(spec.metrics, trial.values, strict=False))


def best_text(study: optuna.Study, spec: Spec) -> str:
    try:
        if len(spec.metrics) > 1:
            return f"{len(study.best_trials)} Pareto-optimal trials"
        best = study.best_trial  # one ordered query
    except ValueError:  # no completed trial yet
        return "-"
    return f"{spec.metrics[0]}={best.value:.4g} (trial {best.number})"


def summary(study: optuna.Study, spec: Spec, ran: int, stopped_early: str | None) -> Summary:
    n = count_states(study)
    finished = sum(n.get(s, 0) for s in FINISHED)
    return Summary(spec.study, redact(spec.storage_url), finished, n.get(TrialState.PRUNED, 0), n.get(TrialState.FAIL, 0),
                   ran, best_text(study, spec), stopped_early)


def record(study: optuna.Study, trial: optuna.Trial, outcome: Outcome, reporter: Reporter) -> None:
    """What the storage keeps of a trial besides params and intermediate values, in one commit."""
    set_attrs(study, trial, user={**outcome.attrs(), "history": reporter.history})


def completed_at(trial: FrozenTrial) -> datetime:
    return trial.datetime_complete or datetime.min


def failures_in_a_row(trials: list[FrozenTrial]) -> int:
    ended = sorted((t for t in trials if t.state.is_finished()), key=completed_at, reverse=True)
    n = 0
    for t in ended:
        if t.state != TrialState.FAIL:
            break
        n += 1
    return n


def reason(trial: FrozenTrial) -> Any:
    return trial.user_attrs.get("reason", trial.state.name.lower())
