"""A study's own trials, counted: imported (warm-start) trials left out of the budget, the best and the progress line; how a trial ended."""

from __future__ import annotations

import weakref
from datetime import datetime
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.study.storage import (
    count_states,
)

if TYPE_CHECKING:
    pass


FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)  # trials that spend the budget


CLAIMED = (TrialState.RUNNING, *FINISHED)  # trials that hold a share of it


IMPORTED = "imported"  # study user attribute: what warm_start.study imported at creation ({study, storage, trials, skipped})


IMPORTED_FROM = "imported_from"  # an imported trial's user attribute: {"study": NAME, "trial": NUMBER}


RE_EVALUATES = "re_evaluates"  # user attribute of a ``top`` config run again here: {"study": NAME, "trial": NUMBER}


_imported: weakref.WeakKeyDictionary[optuna.Study, int] = weakref.WeakKeyDictionary()  # fixed at creation: read once


def imported_count(study: optuna.Study) -> int:
    """How many of the study's COMPLETE trials were imported (they do not spend the budget)."""
    if study not in _imported:
        _imported[study] = int((study.user_attrs.get(IMPORTED) or {}).get("trials", 0))
    return _imported[study]


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


def finished_count(study: optuna.Study) -> int:
    n = own_counts(study)
    return sum(n.get(s, 0) for s in FINISHED)


def last_failed(study: optuna.Study) -> FrozenTrial | None:
    return max(study.get_trials(deepcopy=False, states=(TrialState.FAIL,)), key=completed_at, default=None)


def contract_broken(trial: FrozenTrial) -> str | None:
    """Why the study must stop at once: the trial failed because the objective and the spec disagree."""
    if not trial.user_attrs.get("contract_error"):
        return None
    return (
        f"trial {trial.number} {trial.user_attrs.get('reason')}; the objective and the spec disagree on the metric, "
        "so every trial would fail the same way"
    )


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
