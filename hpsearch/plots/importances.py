"""fANOVA parameter importances: over all completed trials per metric, and per option of a choice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

from hpsearch.plots.flatten import Flat, completed_states

OPTION_MIN_TRIALS = 5  # completed trials an option needs for importances of its own


@dataclass(frozen=True)
class Importances:
    """fANOVA importances of one metric over one set of completed trials."""

    trials: str  # "all" or "optimizer=sgd"
    metric: str
    completed: int  # how many trials the scores come from
    scores: dict[str, float]  # parameter -> importance (they sum to 1), most important first


def importance_groups(flat: Flat, metric_names: list[str]) -> tuple[list[Importances], list[tuple[str, str]]]:
    """Importances over all completed trials for each metric, and for the first metric per
    option that has parameters of its own; plus (trials, reason) for each set left out."""
    completed = flat.study.get_trials(deepcopy=False, states=completed_states())
    sets: list[tuple[str, int, list[FrozenTrial], set[str], int]] = [("all", i, completed, set(), 2) for i in range(len(metric_names))]
    sets[1:1] = [  # the first metric's option sets right after its "all"
        (f"{choice}={option}", 0, [t for t in completed if t.params.get(choice) == option], {choice}, OPTION_MIN_TRIALS)
        for choice, option in flat.options
    ]
    groups, skips = [], []
    for label, i, trials, exclude, minimum in sets:
        if len(trials) < minimum:
            result: dict[str, float] | str = f"needs at least {minimum} completed trials, has {len(trials)}"
        else:
            result = _scores(flat.study, trials, i, exclude)
        if isinstance(result, str):
            skips.append((label if i == 0 else f"{label} ({metric_names[i]})", result))
        else:
            groups.append(Importances(label, metric_names[i], len(trials), result))
    return groups, skips


def _scores(study: optuna.Study, trials: list[FrozenTrial], objective: int, exclude: set[str]) -> dict[str, float] | str:
    """fANOVA importances over the parameters every trial sampled from one distribution."""
    import optuna
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances

    first = trials[0].distributions
    params = [
        name for name, d in first.items() if name not in exclude and not d.single() and all(t.distributions.get(name) == d for t in trials)
    ]
    if not params:
        return "no parameter is sampled in every one of these trials"
    subset = optuna.create_study(directions=study.directions)
    subset.add_trials(trials)
    try:
        scores = get_param_importances(
            subset,
            evaluator=FanovaImportanceEvaluator(seed=0),  # seeded: same ranking each run
            params=params,
            target=objective_of(objective),
        )
    except (ValueError, RuntimeError) as e:
        return str(e)
    return dict(scores) if scores else "no parameter is sampled in every one of these trials"


def objective_of(i: int) -> Callable[[FrozenTrial], float]:
    return lambda t: t.values[i]
