"""What every plot needs to know about the study, computed once (`build_context`), and the helpers
the plots share: which parameters to draw, option colours, axis types, the best trial.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution
    from optuna.trial import FrozenTrial

from hpsearch.plots.flatten import Flat, completed_states, flatten_study
from hpsearch.plots.importances import Importances, importance_groups

STATE_COLOURS = {  # learning-curve colour per TrialState name
    "COMPLETE": "#1f77b4",
    "PRUNED": "#d62728",
    "RUNNING": "#7f7f7f",
}


# Points and bars per option: tab10 without red and grey, blue last (optuna's contours are blue).
OPTION_COLOURS = ("#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#1f77b4")


ALL_TRIALS_COLOUR = "#444444"  # the importance bars over all trials


PRUNED_COLOUR = "#b8b8b8"


LR_NAMES = ("lr", "learning_rate")  # leaf names always drawn in slices, contour, coordinates


@dataclass(frozen=True)
class Context:
    """What the plot table needs to know about the study, computed once."""

    study: optuna.Study
    flat: Flat
    metric_names: list[str]
    trials: list[FrozenTrial]
    completed: list[FrozenTrial]
    pruned: list[FrozenTrial]
    top_params: list[str]  # flattened names: by importance for the first metric, then the rest
    importance_error: str | None  # why importances cannot be computed, None if they can
    importances: list[Importances]
    importance_skips: list[tuple[str, str]]  # (trials, reason) for options left out

    @property
    def multi(self) -> bool:
        return len(self.metric_names) > 1


def is_lr(name: str) -> bool:
    return name.rsplit(".", 1)[-1] in LR_NAMES


def focus(ctx: Context, n: int) -> list[str]:
    """The n most important parameters, the learning rate always among them."""
    pinned = [p for p in ctx.top_params if is_lr(p)][:n]
    rest = [p for p in ctx.top_params if p not in pinned][: n - len(pinned)]
    return sorted(pinned + rest, key=ctx.top_params.index)


def trial_states(ctx: Context) -> dict[str, str]:
    """Curve label used by optuna's intermediate-value plots -> TrialState name."""
    return {f"Trial{t.number}": t.state.name for t in ctx.trials}


def colour_key(ctx: Context, params: list[str]) -> str | None:
    """The choice whose option colours the points: that of the first merged parameter drawn,
    else the first choice with parameters of its own."""
    for p in params:
        if p in ctx.flat.merged:
            return ctx.flat.merged[p].choice
    return ctx.flat.options[0][0] if ctx.flat.options else None


def option_colours(ctx: Context, choice: str | None) -> dict[str, str]:
    options = [o for c, o in ctx.flat.options if c == choice]
    for t in ctx.flat.study.get_trials(deepcopy=False):  # options without parameters too
        if choice in t.params and t.params[choice] not in options:
            options.append(t.params[choice])
    return {f"{choice}={o}": OPTION_COLOURS[i % len(OPTION_COLOURS)] for i, o in enumerate(options)}


def distribution_of(ctx: Context, param: str) -> BaseDistribution:
    return next(t.distributions[param] for t in ctx.flat.study.get_trials(deepcopy=False) if param in t.distributions)


def param_axis(ctx: Context, param: str) -> str:
    """plotly axis type for a parameter: log, category or linear."""
    from optuna.distributions import CategoricalDistribution

    dist = distribution_of(ctx, param)
    if isinstance(dist, CategoricalDistribution):
        return "category"
    return "log" if getattr(dist, "log", False) else "linear"


def best_of(ctx: Context, objective: int) -> FrozenTrial | None:
    """The flattened completed trial with the best value of one metric, per its direction."""
    sign = 1 if ctx.study.directions[objective].name == "MINIMIZE" else -1
    finite = [t for t in ctx.flat.study.get_trials(deepcopy=False, states=completed_states()) if math.isfinite(t.values[objective])]
    return min(finite, key=lambda t: (sign * t.values[objective], t.number), default=None)


def is_numeric(ctx: Context, param: str) -> bool:
    """Whether optuna's contour gives the parameter a numeric axis (numeric choices too)."""
    from optuna.distributions import CategoricalDistribution

    dist = distribution_of(ctx, param)
    if not isinstance(dist, CategoricalDistribution):
        return True
    return all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in dist.choices)


def build_context(study: optuna.Study) -> Context:
    trials = study.get_trials(deepcopy=False)
    completed = [t for t in trials if t.state.name == "COMPLETE"]
    pruned = [t for t in trials if t.state.name == "PRUNED"]
    names = _metric_names(study)
    flat = flatten_study(study)
    groups, skips = importance_groups(flat, names)
    first = next((g for g in groups if g.trials == "all" and g.metric == names[0]), None)
    error = None if first else next((r for label, r in skips if label == "all"), None)
    ranked = list(first.scores) if first else []
    # Important parameters first, then the rest (conditional ones included) by how often sampled.
    by_count = _params_by_count(flat.study.get_trials(deepcopy=False, states=completed_states()))
    top = ranked + [p for p in by_count if p not in ranked]
    return Context(study, flat, names, trials, completed, pruned, top, error, groups, skips)


def _metric_names(study: optuna.Study) -> list[str]:
    n = len(study.directions)
    for names in (study.user_attrs.get("metric_names"), study.metric_names):
        if names and len(names) == n:
            return [str(name) for name in names]
    return ["value"] if n == 1 else [f"objective_{i}" for i in range(n)]


def _params_by_count(trials: list[FrozenTrial]) -> list[str]:
    """Parameter names, most often sampled first (conditional ones come later)."""
    counts: dict[str, int] = {}
    for t in trials:
        for name in t.params:
            counts[name] = counts.get(name, 0) + 1
    return sorted(counts, key=lambda name: (-counts[name], name))


def _natural(value: Any) -> tuple[int, float, str]:
    """Sort key for choices: numbers by value (32, 64, 128), then the rest by their text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def choice_labels(ctx: Context, param: str) -> list[Any]:
    """A categorical parameter's choices in natural order (numbers by value)."""
    return sorted(getattr(distribution_of(ctx, param), "choices", ()), key=_natural)
