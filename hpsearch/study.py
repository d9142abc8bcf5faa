"""The study both engines share: open it, count it, describe it, record a trial's outcome."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import optuna
from optuna.study import StudySummary
from optuna.trial import FrozenTrial, TrialState

from hpsearch.errors import UserError
from hpsearch.registry import PRUNERS, SAMPLERS, sampler_name
from hpsearch.space import Choice, parse_space
from hpsearch.storage import (
    cannot_open,
    count_states,
    engine_url,
    open_storage,
    redact,
    set_attrs,
    sqlite_path,
)
from hpsearch.trial import ERROR_FILE

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
    last_failure: str | None = None  # the latest failed trial: "trial 7 failed: ... (at f.py:3); traceback in ..."
    contract: bool = False  # stopped because the objective broke its contract (a bug: no retry helps)


def build_sampler(spec: Spec, offset: int = 0) -> optuna.samplers.BaseSampler:
    """``offset`` shifts the seed (resume, other processes), so they do not replay the same samples."""
    seed = None if spec.sampler.seed is None else spec.sampler.seed + offset
    return SAMPLERS[sampler_name(spec)].build(spec, seed)


def build_pruner(spec: Spec) -> optuna.pruners.BasePruner:
    return PRUNERS[spec.pruner.name].build(spec)


def open_study(spec: Spec, seed_salt: int = 0, storage: Any = None) -> optuna.Study:
    """Create the study or load it (resume); warm starts are enqueued only on creation.

    A study remembers what defines it (``definition``: objective, metrics, directions, the
    ``fixed:`` values, the space). Resuming it with another objective, metric, direction or
    fixed value raises UserError before anything is written (``adopt_definition`` is the
    explicit way past it); a changed space is allowed with one warning line on stderr.

    ``seed_salt`` tells processes sharing one study apart: with the same seed they would all
    draw the same random start-up configs."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = storage or open_storage(spec.storage_url)
    existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    old = existing.get(spec.study)
    new = definition(spec)
    if old is not None:
        refuse_changes(spec, old, new)
    offset = old.n_trials if old is not None else 0
    study = optuna.create_study(
        storage=storage,
        sampler=build_sampler(spec, offset + seed_salt),
        pruner=build_pruner(spec),
        study_name=spec.study,
        directions=spec.directions,
        load_if_exists=True,
    )
    if old is None:
        label(study, spec)
        study.set_user_attr(DEFINITION, new)
        for config in spec.warm_start:
            study.enqueue_trial(spec.tree.params_from_config({**spec.fixed, **config}), user_attrs={"warm_start": True})
    elif old.user_attrs.get(DEFINITION) != new:  # created before studies kept one, or the space changed (warned)
        study.set_user_attr(DEFINITION, new)
    return study


def label(study: optuna.Study, spec: Spec) -> None:
    """The names readers show: metric names (also for optuna-dashboard) and the objective."""
    study.set_user_attr("metric_names", spec.metrics)
    with warnings.catch_warnings():  # experimental in Optuna: its warning would reach the user's stderr
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(spec.metrics)
    study.set_user_attr("objective", spec.objective)


# ---------------------------------------------------------------------------- what defines a study

DEFINITION = "definition"  # study user attribute: what a resume must match (see open_study)
DEFINITION_HISTORY = "definition_history"  # earlier definitions that adopt_definition replaced
RESUME_ANYWAY = "--resume-anyway"


def definition(spec: Spec) -> dict[str, Any]:
    """What makes two runs the same study. Budget, sampler, pruner, resources and paths may change."""
    plain: dict[str, Any] = _plain(
        {"objective": spec.objective, "metric": spec.metrics, "direction": spec.directions, "fixed": spec.fixed, "space": spec.space}
    )
    return plain


def _plain(value: Any) -> Any:
    """JSON as the storage keeps it (tuples become lists, dates strings), so a stored copy compares equal."""
    return json.loads(json.dumps(value, default=str))


def _shown(value: Any) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return "(unset)" if value is _UNSET else json.dumps(value, default=str)


_UNSET = object()


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``key: old -> new`` for the objective, metrics, directions and each ``fixed:`` value that differ."""
    changed = [
        f"{key}: {_shown(old.get(key))} -> {_shown(new[key])}" for key in ("objective", "metric", "direction") if old.get(key) != new[key]
    ]
    before, after = old.get("fixed") or {}, new["fixed"]
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key, _UNSET), after.get(key, _UNSET)
        if a != b:
            changed.append(f"fixed.{key}: {_shown(a)} -> {_shown(b)}")
    return changed


def space_changes(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """'added a, b; removed c; changed lr' between two stored spaces, or None when they search the same."""

    def params(raw: Any) -> dict[str, str]:
        tree = parse_space(raw, "space", [])
        return {path: _signature(p) for path, p in tree.parameters()}

    if old.get("space") == new["space"]:
        return None
    before, after = params(old.get("space") or {}), params(new["space"])
    parts = [
        f"{what} {', '.join(names)}"
        for what, names in (
            ("added", sorted(after.keys() - before.keys())),
            ("removed", sorted(before.keys() - after.keys())),
            ("changed", sorted(k for k in before.keys() & after.keys() if before[k] != after[k])),
        )
        if names
    ]
    return "; ".join(parts) or None


def _signature(param: Any) -> str:
    """A parameter's distribution, without its sub-spaces (those are parameters of their own)."""
    return repr(param.options) if isinstance(param, Choice) else repr(param)


def refuse_changes(spec: Spec, old: StudySummary, new: dict[str, Any]) -> None:
    """Raise UserError when the spec defines another study than the stored one; warn about a changed space."""
    stored = [d.name.lower() for d in old.directions]
    if stored != spec.directions:
        raise UserError(
            f"{spec.path}: direction: the stored study {spec.study!r} has directions {stored}, the spec says "
            f"{spec.directions}; a study's directions cannot change: run this spec as another study with --study NEW"
        )
    before = old.user_attrs.get(DEFINITION)
    if before is None:  # created before studies recorded their definition: this run records it
        return
    changed = differences(before, new)
    if changed:
        raise UserError(
            f"{spec.path}: study {spec.study!r} in {redact(spec.storage_url)} was run with another definition "
            f"({'; '.join(changed)}); run this spec as a new study with --study NEW, or continue this one "
            f"with {RESUME_ANYWAY} (its trials so far keep what they ran with)"
        )
    space = space_changes(before, new)
    if space:
        print(f"warning: {spec.path}: study {spec.study!r}: the space changed since its last run: {space}", file=sys.stderr, flush=True)


def adopt_definition(spec: Spec) -> list[str]:
    """``--resume-anyway``: make the spec's definition the stored study's, keeping the old one in
    ``definition_history``; return what changed. Directions still cannot change (Optuna fixes them)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(spec.storage_url)
    existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    old = existing.get(spec.study)
    if old is None:
        return []
    new = definition(spec)
    before: dict[str, Any] | None = old.user_attrs.get(DEFINITION)
    changed = differences(before, new) if before is not None else []
    study = optuna.load_study(study_name=spec.study, storage=storage)
    stored = [d.name.lower() for d in study.directions]
    if stored != spec.directions:
        refuse_changes(spec, old, new)  # raises: the directions
    if changed and before is not None:  # only a stored definition can differ
        history = list(old.user_attrs.get(DEFINITION_HISTORY) or [])
        history.append({**before, "replaced": datetime.now().isoformat(timespec="seconds")})
        study.set_user_attr(DEFINITION_HISTORY, history)
        study.set_user_attr(DEFINITION, {**new, "space": before.get("space", new["space"])})  # open_study warns about the space
        label(study, spec)
    return changed


# ---------------------------------------------------------------------------- the claim lock


class ClaimLock:
    """Makes "count the claimed trials, then create one" atomic across every process on a study."""

    def __init__(self, url: str, study: str):
        self.url, self.study = url, study
        self.path = sqlite_path(url)
        self.dialect = url.split(":", 1)[0].split("+", 1)[0]
        if self.path is None and self.dialect not in ("postgresql", "postgres"):
            raise UserError(
                f"storage: cannot open {redact(url)}: hpsearch stores studies in sqlite:///PATH or postgresql://USER:PW@HOST/DB"
            )
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
    last = last_failed(study) if n.get(TrialState.FAIL) else None
    return Summary(
        spec.study,
        redact(spec.storage_url),
        finished,
        n.get(TrialState.PRUNED, 0),
        n.get(TrialState.FAIL, 0),
        ran,
        best_text(study, spec),
        stopped_early,
        failure_text(last, spec) if last else None,
        bool(stopped_early and last is not None and last.user_attrs.get("contract_error")),
    )


def last_failed(study: optuna.Study) -> FrozenTrial | None:
    return max(study.get_trials(deepcopy=False, states=(TrialState.FAIL,)), key=completed_at, default=None)


def failure_text(trial: FrozenTrial, spec: Spec) -> str:
    """A failed trial's reason, and where its traceback is when the objective raised."""
    where = ""
    if "traceback" in trial.user_attrs:
        file = spec.study_dir / f"trial-{trial.number}" / ERROR_FILE
        where = f"; traceback in {file}" if file.exists() else "; traceback in its user attribute 'traceback'"
    return f"trial {trial.number} {reason(trial)}{where}"


def contract_broken(trial: FrozenTrial) -> str | None:
    """Why the study must stop at once: the trial failed because the objective and the spec disagree."""
    if not trial.user_attrs.get("contract_error"):
        return None
    return (
        f"trial {trial.number} {trial.user_attrs.get('reason')}; the objective and the spec disagree on the metric, "
        "so every trial would fail the same way"
    )


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
    """How the trial ended, as progress lines show it: a failure names where the user's code raised."""
    text = trial.user_attrs.get("reason", trial.state.name.lower())
    at = trial.user_attrs.get("error_at")
    return f"{text} (at {at})" if at else text
