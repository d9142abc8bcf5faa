"""Warm start: import an earlier study's trials that fit this space, and the sampler that sees them on this study's scale until its own trials take over."""

from __future__ import annotations

import contextlib
import copy
import statistics
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.base.errors import UserError
from hpsearch.search.space import Choice, Const, Float, Int, Param
from hpsearch.spec.loader import DEFAULT_WARM_UNTIL
from hpsearch.study.storage import (
    open_storage,
    redact,
    sqlite_path,
    study_trials,
)

if TYPE_CHECKING:
    from hpsearch.spec.loader import Spec
from hpsearch.study.counts import IMPORTED, IMPORTED_FROM, RE_EVALUATES, _imported, imported_count

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
        trials = study_trials(self._study, deepcopy=deepcopy, states=states, use_cache=use_cache)
        if self._shift is None or self._own_done is None:
            done = study_trials(self._study, deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED), use_cache=use_cache)
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
