"""What defines a study (space, metrics, objective): stored at creation, compared on resume; a changed space is refused or adopted with --resume-anyway."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

import optuna
from optuna.study import StudySummary

from hpsearch.base.errors import UserError
from hpsearch.search.space import Choice, parse_space
from hpsearch.study.storage import (
    open_storage,
    redact,
)

if TYPE_CHECKING:
    from hpsearch.spec.loader import Spec
import warnings

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
    storage = open_storage(spec.storage_url, outage_s=spec.storage.outage_s)
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


def label(study: optuna.Study, spec: Spec) -> None:
    """The names readers show: metric names (also for optuna-dashboard) and the objective."""
    study.set_user_attr("metric_names", spec.metrics)
    with warnings.catch_warnings():  # experimental in Optuna: its warning would reach the user's stderr
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(spec.metrics)
    study.set_user_attr("objective", spec.objective)
