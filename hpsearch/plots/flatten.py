"""The study with each leaf that several options of one choice share merged into one parameter.

A parameter under a choice option is stored under its path (`optimizer.sgd.lr`,
`optimizer.adamw.lr`; see `hpsearch.search.space`), so none of them is sampled in every trial and
Optuna's importances, slices and contours would leave out the learning rate. `flatten_study` copies
the study in memory with such a leaf as one parameter across all those trials (`lr`, on a log
scale when every source is); every plot is drawn from that copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution
    from optuna.trial import FrozenTrial


@dataclass(frozen=True)
class _Merged:
    """One parameter standing for a leaf that several options of a choice share."""

    choice: str  # e.g. "optimizer"
    paths: list[str]  # e.g. ["optimizer.adamw.lr", "optimizer.sgd.lr"]
    log: bool


@dataclass(frozen=True)
class Flat:
    """The study with merged parameters: same trials, same numbers, in memory."""

    study: optuna.Study
    merged: dict[str, _Merged]  # merged name -> what it stands for
    options: list[tuple[str, Any]]  # (choice, option) pairs whose option has parameters


def flatten_study(study: optuna.Study) -> Flat:
    """Copy the study in memory with each leaf shared by several options merged into one."""
    import optuna

    trials = study.get_trials(deepcopy=False)
    groups: dict[tuple[str, str], dict[str, list[BaseDistribution]]] = {}  # (choice, leaf)
    options: dict[tuple[str, Any], None] = {}  # ordered set
    for t in trials:
        for path, dist in t.distributions.items():
            if (where := _under_option(path, t.params)) is None:
                continue
            choice, leaf = where
            options[(choice, t.params[choice])] = None
            seen = groups.setdefault((choice, leaf), {}).setdefault(path, [])
            if dist not in seen:
                seen.append(dist)

    taken = {name for t in trials for name in t.params}
    shared = [(key, paths) for key, paths in groups.items() if len(paths) > 1]
    leaves = [leaf for (_, leaf), _ in shared]
    merged: dict[str, _Merged] = {}
    rename: dict[str, tuple[str, BaseDistribution]] = {}  # path -> (merged name, distribution)
    for (choice, leaf), paths in shared:
        union = _merge_distributions([d for ds in paths.values() for d in ds])
        if union is None:  # e.g. a float under one option, a choice under another
            continue
        unique = leaves.count(leaf) == 1 and leaf not in taken
        name = leaf if unique else f"{choice}.*.{leaf}"
        merged[name] = _Merged(choice, sorted(paths), bool(getattr(union, "log", False)))
        rename.update({path: (name, union) for path in paths})

    flat = optuna.create_study(study_name=study.study_name, directions=study.directions)
    flat.add_trials([_renamed(t, rename) for t in trials])  # in order: numbers stay the same
    return Flat(flat, merged, _in_space_order(list(options), trials))


def _in_space_order(options: list[tuple[str, Any]], trials: list[FrozenTrial]) -> list[tuple[str, Any]]:
    """(choice, option) pairs grouped by choice, options in the order the space lists them."""
    choices = list(dict.fromkeys(c for c, _ in options))
    listed = {c: list(getattr(t.distributions[c], "choices", ())) for t in trials for c in choices if c in t.params}

    def position(option: tuple[str, Any]) -> tuple[int, int]:
        choice, value = option
        known = listed[choice]  # the space may have changed between resumes
        return choices.index(choice), known.index(value) if value in known else len(known)

    return sorted(options, key=position)


def _under_option(path: str, params: dict[str, Any]) -> tuple[str, str] | None:
    """(choice, leaf) for a parameter under the option its trial took: `optimizer.sgd.lr` ->
    ("optimizer", "lr") when optimizer=sgd; None for a top-level parameter."""
    prefixes = {f"{c}.{v}.": c for c, v in params.items() if path.startswith(f"{c}.{v}.")}
    if not prefixes:
        return None
    prefix = max(prefixes, key=len)  # the innermost choice when choices nest
    return prefixes[prefix], path[len(prefix) :]


def _merge_distributions(dists: list[BaseDistribution]) -> BaseDistribution | None:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    choices = [d for d in dists if isinstance(d, CategoricalDistribution)]
    ranges = [d for d in dists if isinstance(d, (FloatDistribution, IntDistribution))]
    if len(choices) == len(dists):
        return CategoricalDistribution(list(dict.fromkeys(c for d in choices for c in d.choices)))
    if len(ranges) < len(dists):
        return None
    low, high = min(d.low for d in ranges), max(d.high for d in ranges)
    log = all(d.log for d in ranges)  # one linear source: log would hide its spread near 0
    if all(isinstance(d, IntDistribution) for d in ranges):
        return IntDistribution(int(low), int(high), log=log)
    return FloatDistribution(float(low), float(high), log=log)


def _renamed(t: FrozenTrial, rename: dict[str, tuple[str, BaseDistribution]]) -> FrozenTrial:
    from optuna.distributions import FloatDistribution
    from optuna.trial import FrozenTrial

    from hpsearch.study.storage import trial_id

    params: dict[str, Any] = {}
    dists: dict[str, BaseDistribution] = {}
    for path, value in t.params.items():
        name, dist = rename.get(path, (path, t.distributions[path]))
        params[name] = float(value) if isinstance(dist, FloatDistribution) else value
        dists[name] = dist
    return FrozenTrial(
        number=t.number,
        state=t.state,
        value=None,
        values=t.values,
        datetime_start=t.datetime_start,
        datetime_complete=t.datetime_complete,
        params=params,
        distributions=dists,
        user_attrs=t.user_attrs,
        system_attrs=t.system_attrs,
        intermediate_values=t.intermediate_values,
        trial_id=trial_id(t),
    )


def completed_states() -> tuple[Any, ...]:
    from optuna.trial import TrialState

    return (TrialState.COMPLETE,)
