"""The study both engines share: open it, count it, describe it, record a trial's outcome."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import statistics
import sys
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import optuna
from optuna.study import StudySummary
from optuna.trial import FrozenTrial, TrialState

from hpsearch.errors import UserError
from hpsearch.registry import PRUNERS, SAMPLERS, sampler_name
from hpsearch.space import Choice, Const, Float, Int, Param, parse_space
from hpsearch.spec import DEFAULT_WARM_UNTIL
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
    imported: int = 0  # completed trials imported from warm_start.study (not in ``finished``)


def build_sampler(spec: Spec, offset: int = 0) -> optuna.samplers.BaseSampler:
    """``offset`` shifts the seed (resume, other processes), so they do not replay the same samples."""
    seed = None if spec.sampler.seed is None else spec.sampler.seed + offset
    return SAMPLERS[sampler_name(spec)].build(spec, seed)


def build_pruner(spec: Spec) -> optuna.pruners.BasePruner:
    return PRUNERS[spec.pruner.name].build(spec)


def open_study(spec: Spec, seed_salt: int = 0, storage: Any = None) -> optuna.Study:
    """Create the study or load it (resume); warm starts are imported and enqueued only on creation.

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
        warm_start(study, spec)
        for config in spec.warm_start.configs:
            study.enqueue_trial(spec.tree.params_from_config({**spec.fixed, **config}), user_attrs={"warm_start": True})
    elif old.user_attrs.get(DEFINITION) != new:  # created before studies kept one, or the space changed (warned)
        study.set_user_attr(DEFINITION, new)
    imported = imported_count(study)
    if imported:  # the median/percentile pruners count completed trials, imported ones too: wait for this study's own
        startup = spec.pruner.startup_trials + imported
        study.pruner = build_pruner(spec.model_copy(update={"pruner": spec.pruner.model_copy(update={"startup_trials": startup})}))
        study.sampler = warm_sampler(study, study.sampler, spec.warm_until)
    return study


def label(study: optuna.Study, spec: Spec) -> None:
    """The names readers show: metric names (also for optuna-dashboard) and the objective."""
    study.set_user_attr("metric_names", spec.metrics)
    with warnings.catch_warnings():  # experimental in Optuna: its warning would reach the user's stderr
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(spec.metrics)
    study.set_user_attr("objective", spec.objective)


# ---------------------------------------------------------------------------- warm start from an earlier study

IMPORTED = "imported"  # study user attribute: what warm_start.study imported at creation ({study, storage, trials, skipped})
IMPORTED_FROM = "imported_from"  # an imported trial's user attribute: {"study": NAME, "trial": NUMBER}
RE_EVALUATES = "re_evaluates"  # user attribute of a ``top`` config run again here: {"study": NAME, "trial": NUMBER}
_imported: weakref.WeakKeyDictionary[optuna.Study, int] = weakref.WeakKeyDictionary()  # fixed at creation: read once
_MISSING = object()


def source_trials(spec: Spec) -> list[FrozenTrial]:
    """The completed trials of ``warm_start.study`` (its own, not ones it imported in turn); a
    one-line UserError, before anything is written, when it cannot be read or measures another metric."""
    warm, url = spec.warm_start, spec.warm_storage_url
    if warm.study is None or url is None:
        return []
    path = sqlite_path(url)
    if path is not None and not path.exists():
        key, hint = (
            ("warm_start.storage", "") if warm.storage is not None else ("warm_start.study", "; set warm_start.storage if it is elsewhere")
        )
        raise UserError(f"{spec.path}: {key}: no study database at {path} (has study {warm.study!r} been run?{hint})")
    try:
        storage = open_storage(url, read_only=path is not None)
        names = optuna.get_all_study_names(storage)
    except UserError as exc:
        raise UserError(f"{spec.path}: warm_start.storage: {exc}") from None
    if warm.study not in names:
        raise UserError(
            f"{spec.path}: warm_start.study: no study named {warm.study!r} in {redact(url)} (found: {', '.join(names) or 'none'})"
        )
    source = optuna.load_study(study_name=warm.study, storage=storage)
    theirs = ([d.name.lower() for d in source.directions], list(source.user_attrs.get("metric_names") or spec.metrics))
    if theirs != (spec.directions, spec.metrics):
        raise UserError(
            f"{spec.path}: warm_start.study: {warm.study!r} measures {theirs[1]} {theirs[0]}, this spec "
            f"{spec.metrics} {spec.directions}; its values would mislead the sampler"
        )
    return [t for t in source.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if IMPORTED_FROM not in t.user_attrs]


def check_warm_start(spec: Spec) -> None:
    """``hpsearch run``/``worker``: a warm_start.study that cannot be read is one line before the study is created."""
    if spec.warm_start.study is None:
        return
    path = sqlite_path(spec.storage_url)
    if path is None or path.exists():  # the study may exist already
        with contextlib.suppress(UserError):  # the study's own storage problems are reported where it is opened
            names = optuna.get_all_study_names(open_storage(spec.storage_url, read_only=path is not None))
            if spec.study in names:
                return  # created already: the import happened then, and its source may be gone by now
    source_trials(spec)


def warm_start(study: optuna.Study, spec: Spec) -> None:
    """Import the earlier study's completed trials that fit this space; enqueue its best ``top``."""
    trials = source_trials(spec)
    if spec.warm_start.study is None:
        return
    fitted = [(t, fit(t, spec)) for t in trials]
    fits = [(t, f) for t, f in fitted if f is not None]
    source = spec.warm_start.study
    paths = dict(spec.tree.parameters())
    study.add_trials([imported_trial(t, params, {p: distribution(paths[p]) for p in params}, source) for t, params in fits])
    top = sorted(fits, key=lambda tf: (-tf[0].values[0] if spec.directions[0] == "maximize" else tf[0].values[0], tf[0].number))
    for t, params in top[: spec.warm_start.top]:
        study.enqueue_trial(params, user_attrs={"warm_start": True, RE_EVALUATES: {"study": source, "trial": t.number}})
    dropped = sorted({p for t in trials for p in t.params} - {path for path, _ in spec.tree.parameters()})
    skipped, top_n = len(trials) - len(fits), min(spec.warm_start.top, len(fits))
    where = redact(spec.warm_storage_url or "")
    study.set_user_attr(
        IMPORTED, {"study": source, "storage": where, "trials": len(fits), "skipped": skipped, "dropped": dropped, "top": top_n}
    )
    _imported[study] = len(fits)
    print(import_line(spec, len(fits), skipped, dropped, top_n), flush=True)


def import_line(spec: Spec, n: int, skipped: int, dropped: list[str], top: int) -> str:
    parts = [f"{spec.study}: imported {n} finished trials of study {spec.warm_start.study} (they inform the sampler, not the budget)"]
    if skipped:
        parts.append(f"skipped {skipped} with a value outside this space")
    if dropped:
        parts.append(f"dropped parameters no longer searched: {', '.join(dropped)}")
    if top:
        parts.append(f"re-evaluating its best {top} first")
    return "; ".join(parts)


def fit(trial: FrozenTrial, spec: Spec) -> dict[str, Any] | None:
    """The trial's parameters in this space (those that left it dropped; new ones absent, so
    sampled), or None when one of its values lies outside this space."""
    params: dict[str, Any] = {}
    fits = True

    def pick(path: str, param: Param) -> Any:
        nonlocal fits
        value = trial.params.get(path, _MISSING)
        if value is _MISSING:
            return _MISSING  # a new parameter (or under a new option): the sampler fills it
        if not contains(param, value):
            fits = False
            return _MISSING
        params[path] = value
        return value

    spec.tree.walk(pick)
    return params if fits else None


def contains(param: Param, value: Any) -> bool:
    """Whether ``value`` could have been sampled from ``param`` (a step grid included)."""
    if isinstance(param, Choice):
        return any(value == o and type(value) is type(o) for o in param.options)
    if isinstance(param, Const) or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if not param.low <= value <= param.high:
        return False
    if isinstance(param, Int):
        return float(value).is_integer() and (int(value) - param.low) % param.step == 0
    steps = (value - param.low) / param.step if param.step else 0.0
    return abs(steps - round(steps)) < 1e-6


def distribution(param: Param) -> optuna.distributions.BaseDistribution:
    """The Optuna distribution ``space.suggest_one`` samples ``param`` from."""
    if isinstance(param, Float):
        return optuna.distributions.FloatDistribution(param.low, param.high, log=param.log, step=param.step)
    if isinstance(param, Int):
        return optuna.distributions.IntDistribution(param.low, param.high, log=param.log, step=param.step)
    if isinstance(param, Choice):
        return optuna.distributions.CategoricalDistribution(list(param.options))
    raise TypeError(f"no distribution for {param!r}")


def imported_trial(
    trial: FrozenTrial, params: dict[str, Any], space: dict[str, optuna.distributions.BaseDistribution], source: str
) -> FrozenTrial:
    """A COMPLETE trial with the source's values, without its per-epoch values (the pruner judges
    this study's curves only: the earlier setting's epochs are not these)."""
    kept = {k: v for k, v in trial.user_attrs.items() if k in ("config", "epochs", "wall_s", "metrics")}
    return optuna.trial.create_trial(
        params=params,
        distributions=space,
        values=trial.values,
        user_attrs={
            **kept,
            IMPORTED_FROM: {"study": source, "trial": trial.number},
            "reason": f"imported from {source} trial {trial.number}",
        },
        state=TrialState.COMPLETE,
    )


def imported_count(study: optuna.Study) -> int:
    """How many of the study's COMPLETE trials were imported (they do not spend the budget)."""
    if study not in _imported:
        _imported[study] = int((study.user_attrs.get(IMPORTED) or {}).get("trials", 0))
    return _imported[study]


def warm_sampler(study: optuna.Study, sampler: optuna.samplers.BaseSampler, until: int = DEFAULT_WARM_UNTIL) -> optuna.samplers.BaseSampler:
    """``sampler``, wrapped in WarmSampler when the study imported trials from an earlier one."""
    return WarmSampler(sampler, until) if imported_count(study) and not isinstance(sampler, WarmSampler) else sampler


class WarmSampler(optuna.samplers.BaseSampler):
    """The spec's sampler, shown the imported trials at this study's scale.

    An imported value was measured in the earlier, cheaper setting (fewer epochs, less data):
    on its own scale it sits below every value of this study. Taken as it is, TPE would put
    all imported trials among its bad ones as soon as a few trials of this study finish, and
    steer away from the very region the earlier study found good. So the sampler sees each
    imported value moved by ``import_shift``: how far this study's re-evaluations of the
    earlier best configs (``warm_start.top``) landed from their imported values. The stored
    values are not changed: dashboards and reports show what was measured.

    The imported trials stand in for the sampler's random start-up: once ``until`` trials of
    this study finished (completed or pruned, as TPE counts its start-up), the sampler sees
    those alone. An earlier setting ranks configs with a bias (2 epochs on a subset favour
    small batches, which take more steps per image); kept for the whole study, its many trials
    would hold the sampler in the region it found."""

    def __init__(self, inner: optuna.samplers.BaseSampler, until: int = DEFAULT_WARM_UNTIL) -> None:
        self.inner = inner
        self.until = until

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        space: dict[str, Any] = self.inner.infer_relative_search_space(_ShiftedView(study, self.until), trial)  # type: ignore[arg-type]
        return space

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        return self.inner.sample_relative(_ShiftedView(study, self.until), trial, search_space)  # type: ignore[arg-type]

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: Any) -> Any:
        return self.inner.sample_independent(_ShiftedView(study, self.until), trial, param_name, param_distribution)  # type: ignore[arg-type]

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


class _ShiftedView:
    """The study as the sampler reads it: imported trials' values moved by ``import_shift``, and
    no imported trials once ``until`` of the study's own finished."""

    def __init__(self, study: optuna.Study, until: int = DEFAULT_WARM_UNTIL) -> None:
        self._study = study
        self._until = until
        self._shift: list[float] | None = None
        self._own_done: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy, states)

    def _get_trials(self, deepcopy: bool = True, states: Any = None, use_cache: bool = False) -> list[FrozenTrial]:
        trials = self._study._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache)
        if self._shift is None or self._own_done is None:
            done = self._study._get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED), use_cache=use_cache)
            self._own_done = sum(IMPORTED_FROM not in t.user_attrs for t in done)  # as TPE counts its start-up: pruned ones too
            self._shift = import_shift(done)
        if self._own_done >= self._until:  # the study's own trials rank the space now
            return [t for t in trials if IMPORTED_FROM not in t.user_attrs]
        if not any(self._shift):
            return trials
        return [shifted(t, self._shift) if IMPORTED_FROM in t.user_attrs and t.values else t for t in trials]


def shifted(trial: FrozenTrial, shift: list[float]) -> FrozenTrial:
    moved = copy.copy(trial)
    moved.values = [v + s for v, s in zip(trial.values, shift, strict=True)]
    return moved


def import_shift(trials: list[FrozenTrial]) -> list[float]:
    """Per objective, how far this study's values lie from the imported ones: the median, over
    the re-evaluated configs (``warm_start.top``) that completed, of (value here - imported value).
    Without a completed re-evaluation, once 3 of this study's own trials completed: their median
    minus the imported trials' median (a rougher match of the two scales). Zeros before either."""
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.values]
    imported = {
        (t.user_attrs[IMPORTED_FROM].get("study"), t.user_attrs[IMPORTED_FROM].get("trial")): t
        for t in done
        if IMPORTED_FROM in t.user_attrs
    }
    if not imported:
        return []
    width = len(next(iter(imported.values())).values)
    pairs = []
    for t in done:
        source = t.user_attrs.get(RE_EVALUATES)
        if isinstance(source, dict) and (source.get("study"), source.get("trial")) in imported:
            pairs.append((t.values, imported[source["study"], source["trial"]].values))
    if pairs:
        return [statistics.median(own[i] - theirs[i] for own, theirs in pairs) for i in range(width)]
    own = [t for t in done if IMPORTED_FROM not in t.user_attrs]
    if len(own) < 3:
        return [0.0] * width
    return [statistics.median(t.values[i] for t in own) - statistics.median(t.values[i] for t in imported.values()) for i in range(width)]


def own_counts(study: optuna.Study) -> dict[TrialState, int]:
    """Trials per state, imported ones left out: what the budget and the progress line count."""
    n = count_states(study)
    imported = imported_count(study)
    if imported:
        n[TrialState.COMPLETE] = n.get(TrialState.COMPLETE, 0) - imported
    return n


def own_best(study: optuna.Study) -> list[FrozenTrial]:
    """The best trial (or the Pareto-optimal ones) among this study's own trials: an imported
    trial ran in another setting (fewer epochs, less data), so it informs the sampler but is not a
    result of this study. Empty before the first own trial completes."""
    if not imported_count(study):
        try:
            return sorted(study.best_trials, key=lambda t: t.number) if len(study.directions) > 1 else [study.best_trial]
        except ValueError:
            return []
    own = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if IMPORTED_FROM not in t.user_attrs]
    signs = [1.0 if d == optuna.study.StudyDirection.MAXIMIZE else -1.0 for d in study.directions]
    scores = [[s * v for s, v in zip(signs, t.values, strict=True)] for t in own]
    if len(signs) == 1:
        return [max(own, key=lambda t: (signs[0] * t.values[0], -t.number))] if own else []

    def dominated(a: list[float]) -> bool:
        return any(all(x >= y for x, y in zip(b, a, strict=True)) and b != a for b in scores)

    return [t for t, score in zip(own, scores, strict=True) if not dominated(score)]


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
    n = own_counts(study)
    c = progress.counts
    c.done = sum(n.get(s, 0) for s in FINISHED)
    c.pruned = n.get(TrialState.PRUNED, 0)
    c.failed = n.get(TrialState.FAIL, 0)
    c.running = n.get(TrialState.RUNNING, 0)
    if best:
        c.best = best_text(study, spec) if n.get(TrialState.COMPLETE) else "-"
    progress.refresh()


def finished_count(study: optuna.Study) -> int:
    n = own_counts(study)
    return sum(n.get(s, 0) for s in FINISHED)


def trial_value_text(trial: FrozenTrial, spec: Spec) -> str:
    if trial.state != TrialState.COMPLETE or trial.values is None:
        return "-"
    return ", ".join(f"{m}={v:.4g}" for m, v in zip(spec.metrics, trial.values, strict=False))


def best_text(study: optuna.Study, spec: Spec) -> str:
    best = own_best(study)  # one ordered query when nothing was imported
    if not best:  # no completed trial of its own yet
        return "-"
    if len(spec.metrics) > 1:
        return f"{len(best)} Pareto-optimal trials"
    return f"{spec.metrics[0]}={best[0].values[0]:.4g} (trial {best[0].number})"


def summary(study: optuna.Study, spec: Spec, ran: int, stopped_early: str | None) -> Summary:
    n = own_counts(study)
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
        imported_count(study),
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
