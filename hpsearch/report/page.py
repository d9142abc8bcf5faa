"""Plots (interactive HTML and PNG), parameter importances and an index page for one study.

`write_report(study, out_dir)` draws every plot in `_PLOTS` that applies to the study as HTML
(plotly) and PNG (matplotlib), writes the importances to `importances.json`, and writes
`index.html` with a summary, the top trials, the importances and links to every file. Plots
that do not apply (too few trials or parameters) are listed in the index with the reason.

A parameter under a choice option is stored under its path (`optimizer.sgd.lr`,
`optimizer.adamw.lr`; see `hpsearch.spec.space`), so none of them is sampled in every trial and
Optuna's importances, slices and contours would leave out the learning rate. The report first
flattens the study: a leaf that several options of one choice share becomes one parameter
across all those trials (`lr`, on a log scale when every source is). Everything parameter-wise
is drawn from that flattened copy: importances over all trials and per option
(`optimizer=sgd`), slices coloured by option, a contour of the learning rate against the top
other parameter, and parallel coordinates of the top `PARALLEL_PARAMS` parameters.
"""

from __future__ import annotations

import html
import json
import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution
    from optuna.trial import FrozenTrial

STATE_COLOURS = {  # learning-curve colour per TrialState name
    "COMPLETE": "#1f77b4",
    "PRUNED": "#d62728",
    "RUNNING": "#7f7f7f",
}
# Points and bars per option: tab10 without red and grey, blue last (optuna's contours are blue).
OPTION_COLOURS = ("#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#1f77b4")
ALL_TRIALS_COLOUR = "#444444"  # the importance bars over all trials
PRUNED_COLOUR = "#b8b8b8"
PNG_DPI = 100  # optuna's 6.4 x 4.8 in figures -> about 640 x 480 px
TOP_TRIALS = 10
LR_NAMES = ("lr", "learning_rate")  # leaf names always drawn in slices, contour, coordinates
PARALLEL_PARAMS = 8  # more axes than this are unreadable; the rest are named under the plot
SLICE_PARAMS = 4  # panels in the slice plot
OPTION_MIN_TRIALS = 5  # completed trials an option needs for importances of its own


@dataclass(frozen=True)
class _Merged:
    """One parameter standing for a leaf that several options of a choice share."""

    choice: str  # e.g. "optimizer"
    paths: list[str]  # e.g. ["optimizer.adamw.lr", "optimizer.sgd.lr"]
    log: bool


@dataclass(frozen=True)
class _Flat:
    """The study with merged parameters: same trials, same numbers, in memory."""

    study: optuna.Study
    merged: dict[str, _Merged]  # merged name -> what it stands for
    options: list[tuple[str, Any]]  # (choice, option) pairs whose option has parameters


@dataclass(frozen=True)
class _Importances:
    """fANOVA importances of one metric over one set of completed trials."""

    trials: str  # "all" or "optimizer=sgd"
    metric: str
    completed: int  # how many trials the scores come from
    scores: dict[str, float]  # parameter -> importance (they sum to 1), most important first


@dataclass(frozen=True)
class _Context:
    """What the plot table needs to know about the study, computed once."""

    study: optuna.Study
    flat: _Flat
    metric_names: list[str]
    trials: list[FrozenTrial]
    completed: list[FrozenTrial]
    pruned: list[FrozenTrial]
    top_params: list[str]  # flattened names: by importance for the first metric, then the rest
    importance_error: str | None  # why importances cannot be computed, None if they can
    importances: list[_Importances]
    importance_skips: list[tuple[str, str]]  # (trials, reason) for options left out

    @property
    def multi(self) -> bool:
        return len(self.metric_names) > 1


@dataclass(frozen=True)
class _Own:
    """A plot drawn here rather than by optuna: fn(ctx, **kwargs) for each backend."""

    plotly: Callable[..., Any]  # -> plotly Figure
    matplotlib: Callable[..., Any]  # -> Axes or array of Axes


@dataclass(frozen=True)
class _Plot:
    """One row of the plot table: an optuna function name (in both of its modules) or _Own."""

    name: str  # file stem
    title: str
    fn: str | _Own
    skip: Callable[[_Context], str | None]  # reason the plot does not apply, or None
    kwargs: Callable[[_Context], dict[str, Any]] = lambda ctx: {}
    per_objective: bool = True  # one plot per objective via target= in multi-objective studies
    multi_only: bool = False
    restyle_plotly: Callable[[Any, _Context, dict[str, Any]], None] | None = None
    restyle_matplotlib: Callable[[Any, _Context, dict[str, Any]], None] | None = None
    note: Callable[[_Context], str | None] = lambda ctx: None  # a line under the plot


@dataclass(frozen=True)
class _Drawn:
    title: str
    html: Path
    png: Path
    note: str | None = None


def _needs_completed(n: int) -> Callable[[_Context], str | None]:
    def skip(ctx: _Context) -> str | None:
        if len(ctx.completed) < n:
            return f"needs at least {n} completed trial(s), the study has {len(ctx.completed)}"
        return None

    return skip


def _needs_params(n: int, completed: int = 1) -> Callable[[_Context], str | None]:
    def skip(ctx: _Context) -> str | None:
        if reason := _needs_completed(completed)(ctx):
            return reason
        if len(ctx.top_params) < n:
            return f"needs at least {n} parameter(s), the study has {len(ctx.top_params)}"
        return None

    return skip


def _skip_curves(ctx: _Context) -> str | None:
    if not any(t.intermediate_values for t in ctx.trials):
        return "no trial reported intermediate values"
    return None


def _skip_importances(ctx: _Context) -> str | None:
    return _needs_completed(2)(ctx) or ctx.importance_error


def _skip_pareto(ctx: _Context) -> str | None:
    if len(ctx.metric_names) > 3:
        return f"draws 2 or 3 objectives, the study has {len(ctx.metric_names)}"
    return _needs_completed(1)(ctx)


def _is_lr(name: str) -> bool:
    return name.rsplit(".", 1)[-1] in LR_NAMES


def _focus(ctx: _Context, n: int) -> list[str]:
    """The n most important parameters, the learning rate always among them."""
    pinned = [p for p in ctx.top_params if _is_lr(p)][:n]
    rest = [p for p in ctx.top_params if p not in pinned][: n - len(pinned)]
    return sorted(pinned + rest, key=ctx.top_params.index)


def _contour_params(ctx: _Context) -> dict[str, Any]:
    """The learning rate and the most important other parameter, or the top two. Not the
    choice the learning rate is merged over: its options are the points' colours instead."""
    lr = [p for p in ctx.top_params if _is_lr(p)][:1]
    own = {ctx.flat.merged[p].choice for p in lr if p in ctx.flat.merged}
    others = [p for p in ctx.top_params if p not in lr]
    others = [p for p in others if p not in own] or others
    return {"params": lr + others[: 2 - len(lr)]}


def _parallel_note(ctx: _Context) -> str | None:
    hidden = [p for p in ctx.top_params if p not in _focus(ctx, PARALLEL_PARAMS)]
    if not hidden:
        return None
    return f"top {PARALLEL_PARAMS} of {len(ctx.top_params)} parameters by importance; not drawn: {', '.join(hidden)}"


def _parallel_title(ctx: _Context, kwargs: dict[str, Any]) -> str:
    return f"Parallel coordinates: top {len(kwargs['params'])} of {len(ctx.top_params)} parameters"


def _title_parallel_plotly(fig: Any, ctx: _Context, kwargs: dict[str, Any]) -> None:
    fig.update_layout(title={"text": _parallel_title(ctx, kwargs)})


def _title_parallel_matplotlib(ax: Any, ctx: _Context, kwargs: dict[str, Any]) -> None:
    ax.set_title(_parallel_title(ctx, kwargs))


def _colour_curves_plotly(fig: Any, ctx: _Context, kwargs: dict[str, Any]) -> None:
    """Colour each learning curve by its trial's state; pruned curves dotted."""
    states = _trial_states(ctx)
    shown: set[str] = set()
    for trace in fig.data:
        state = states.get(trace.name, "RUNNING")
        colour = STATE_COLOURS.get(state, STATE_COLOURS["RUNNING"])
        trace.update(
            line={"color": colour, "dash": "dot" if state == "PRUNED" else "solid"},
            marker={"color": colour},
            legendgroup=state,
            showlegend=state not in shown,  # one legend entry per state
            hovertemplate=f"{trace.name} ({state.lower()})<br>epoch %{{x}}: %{{y}}<extra></extra>",
            name=state.lower(),
        )
        shown.add(state)
    fig.update_layout(title="Learning curves", showlegend=True, xaxis_title="epoch", yaxis_title=ctx.metric_names[0])


def _colour_curves_matplotlib(ax: Any, ctx: _Context, kwargs: dict[str, Any]) -> None:
    from matplotlib.lines import Line2D

    states = _trial_states(ctx)
    present: set[str] = set()
    for line in ax.get_lines():
        state = states.get(line.get_label(), "RUNNING")
        line.set_color(STATE_COLOURS.get(state, STATE_COLOURS["RUNNING"]))
        line.set_linestyle(":" if state == "PRUNED" else "-")
        present.add(state)
    handles = [
        Line2D([], [], color=colour, linestyle=":" if state == "PRUNED" else "-", label=state.lower())
        for state, colour in STATE_COLOURS.items()
        if state in present
    ]
    ax.legend(handles=handles, loc="best")  # replaces optuna's one-entry-per-trial legend
    ax.set_title("Learning curves")
    ax.set_xlabel("epoch")
    ax.set_ylabel(ctx.metric_names[0])


def _trial_states(ctx: _Context) -> dict[str, str]:
    """Curve label used by optuna's intermediate-value plots -> TrialState name."""
    return {f"Trial{t.number}": t.state.name for t in ctx.trials}


# ---- the flattened study ---------------------------------------------------------------------


def _flatten(study: optuna.Study) -> _Flat:
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
    return _Flat(flat, merged, _in_space_order(list(options), trials))


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


# ---- importances -----------------------------------------------------------------------------


def _importance_groups(flat: _Flat, metric_names: list[str]) -> tuple[list[_Importances], list[tuple[str, str]]]:
    """Importances over all completed trials for each metric, and for the first metric per
    option that has parameters of its own; plus (trials, reason) for each set left out."""
    completed = flat.study.get_trials(deepcopy=False, states=_complete())
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
            groups.append(_Importances(label, metric_names[i], len(trials), result))
    return groups, skips


def _complete() -> tuple[Any, ...]:
    from optuna.trial import TrialState

    return (TrialState.COMPLETE,)


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
            target=_objective(objective),
        )
    except (ValueError, RuntimeError) as e:
        return str(e)
    return dict(scores) if scores else "no parameter is sampled in every one of these trials"


def _write_importances(ctx: _Context, path: Path) -> None:
    data = {
        "evaluator": "fanova",
        "merged": {name: m.paths for name, m in ctx.flat.merged.items()},
        "groups": [{"trials": g.trials, "metric": g.metric, "completed": g.completed, "importances": g.scores} for g in ctx.importances],
        "skipped": [{"trials": label, "reason": reason} for label, reason in ctx.importance_skips],
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _groups_for(ctx: _Context, metric: str) -> list[_Importances]:
    """The sets drawn for one metric: all trials, and each option of the main choice (more
    sets make the bars unreadable; the index table has every set)."""
    main = _colour_by(ctx, ctx.top_params)
    groups = [g for g in ctx.importances if g.metric == metric and (g.trials == "all" or g.trials.startswith(f"{main}="))]
    if not groups:
        reasons = [r for label, r in ctx.importance_skips if label == f"all ({metric})"]
        raise ValueError(reasons[0] if reasons else f"no importances for {metric}")
    return groups


def _bar_colours(ctx: _Context) -> dict[str, str]:
    return {"all": ALL_TRIALS_COLOUR, **_option_colours(ctx, _colour_by(ctx, ctx.top_params))}


def _importance_rows(groups: list[_Importances]) -> list[str]:
    """Parameters in the order of the first group's ranking, then any only the others have."""
    return list(dict.fromkeys(p for g in groups for p in g.scores))


def _importances_plotly(ctx: _Context, **kwargs: Any) -> Any:
    import plotly.graph_objects as go

    metric = kwargs["target_name"]
    groups = _groups_for(ctx, metric)
    colours = _bar_colours(ctx)
    params = _importance_rows(groups)[::-1]  # plotly draws the first row at the bottom
    fig = go.Figure(
        [
            go.Bar(
                x=[g.scores.get(p) for p in params],
                y=params,
                orientation="h",
                name=f"{g.trials} ({g.completed} trials)",
                marker_color=colours.get(g.trials),
                hovertemplate="%{y}: %{x:.3f}<extra>" + html.escape(g.trials) + "</extra>",
            )
            for g in groups
        ]
    )
    fig.update_layout(
        title=f"Parameter importances for {metric} (fANOVA)",
        barmode="group",
        xaxis_title="importance (sums to 1 per set of trials)",
        height=max(400, 100 + 12 * len(params) * len(groups)),
    )
    return fig


def _importances_matplotlib(ctx: _Context, **kwargs: Any) -> Any:
    import matplotlib.pyplot as plt

    metric = kwargs["target_name"]
    groups = _groups_for(ctx, metric)
    params = _importance_rows(groups)
    height = 0.8 / len(groups)
    _, ax = plt.subplots(figsize=(6.4, max(3.0, 0.9 + 0.15 * len(params) * len(groups))))
    for k, g in enumerate(groups):
        ax.barh(
            [i + k * height for i in range(len(params))],
            [g.scores.get(p, math.nan) for p in params],
            height=height,
            label=f"{g.trials} ({g.completed} trials)",
            color=_bar_colours(ctx)[g.trials],
        )
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(params))], params)
    ax.invert_yaxis()  # most important on top
    ax.set_xlabel("importance (sums to 1 per set of trials)")
    ax.set_title(f"Parameter importances for {metric} (fANOVA)")
    ax.legend(loc="lower right")
    return ax


# ---- slices and contour points ---------------------------------------------------------------


@dataclass(frozen=True)
class _Points:
    """Markers of one kind in one panel."""

    label: str
    colour: str
    symbol: str  # plotly name: circle, x-thin-open, star-open (open: the option shows through)
    x: list[Any]
    y: list[float]
    trials: list[int]


_MPL_MARKERS = {  # plotly symbol -> matplotlib scatter style
    "circle": {"marker": "o", "s": 24},
    "x-thin-open": {"marker": "x", "s": 24},
    "star-open": {"marker": "*", "s": 200, "facecolors": "none", "linewidths": 1.2, "zorder": 3},
}


def _colour_by(ctx: _Context, params: list[str]) -> str | None:
    """The choice whose option colours the points: that of the first merged parameter drawn,
    else the first choice with parameters of its own."""
    for p in params:
        if p in ctx.flat.merged:
            return ctx.flat.merged[p].choice
    return ctx.flat.options[0][0] if ctx.flat.options else None


def _option_colours(ctx: _Context, choice: str | None) -> dict[str, str]:
    options = [o for c, o in ctx.flat.options if c == choice]
    for t in ctx.flat.study.get_trials(deepcopy=False):  # options without parameters too
        if choice in t.params and t.params[choice] not in options:
            options.append(t.params[choice])
    return {f"{choice}={o}": OPTION_COLOURS[i % len(OPTION_COLOURS)] for i, o in enumerate(options)}


def _distribution(ctx: _Context, param: str) -> BaseDistribution:
    return next(t.distributions[param] for t in ctx.flat.study.get_trials(deepcopy=False) if param in t.distributions)


def _axis(ctx: _Context, param: str) -> str:
    """plotly axis type for a parameter: log, category or linear."""
    from optuna.distributions import CategoricalDistribution

    dist = _distribution(ctx, param)
    if isinstance(dist, CategoricalDistribution):
        return "category"
    return "log" if getattr(dist, "log", False) else "linear"


def _points(ctx: _Context, param: str, objective: int, colour_by: str | None) -> list[_Points]:
    """Completed trials per option, pruned ones (first metric: their last reported value)
    in grey, and the best trial as a star."""
    category = _axis(ctx, param) == "category"
    colours = _option_colours(ctx, colour_by)
    trials = ctx.flat.study.get_trials(deepcopy=False)
    by_label: dict[str, list[tuple[Any, float, int]]] = {}
    for t in trials:
        if param not in t.params:
            continue
        if t.state.name == "COMPLETE" and math.isfinite(t.values[objective]):
            label = f"{colour_by}={t.params[colour_by]}" if colour_by in t.params else "complete"
            y = t.values[objective]
        elif t.state.name == "PRUNED" and objective == 0 and t.intermediate_values:
            label, y = "pruned (last reported)", t.intermediate_values[max(t.intermediate_values)]
            if not math.isfinite(y):
                continue
        else:
            continue
        x = str(t.params[param]) if category else t.params[param]
        by_label.setdefault(label, []).append((x, y, t.number))

    series = []
    for label, points in by_label.items():
        pruned = label.startswith("pruned")
        colour = PRUNED_COLOUR if pruned else colours.get(label, STATE_COLOURS["COMPLETE"])
        xs, ys, numbers = map(list, zip(*points, strict=True))
        series.append(_Points(label, colour, "x-thin-open" if pruned else "circle", xs, ys, numbers))
    series.sort(key=lambda s: s.label.startswith("pruned"))  # pruned drawn first, underneath
    if (best := _best(ctx, objective)) is not None and param in best.params:
        x = str(best.params[param]) if category else best.params[param]
        series.append(_Points("best", "#000000", "star-open", [x], [best.values[objective]], [best.number]))
    return series


def _best(ctx: _Context, objective: int) -> FrozenTrial | None:
    """The flattened completed trial with the best value of one metric, per its direction."""
    sign = 1 if ctx.study.directions[objective].name == "MINIMIZE" else -1
    finite = [t for t in ctx.flat.study.get_trials(deepcopy=False, states=_complete()) if math.isfinite(t.values[objective])]
    return min(finite, key=lambda t: (sign * t.values[objective], t.number), default=None)


def _slice_title(ctx: _Context, metric: str, colour_by: str | None) -> str:
    i = ctx.metric_names.index(metric)
    direction = ctx.study.directions[i].name.lower()
    colour = f", colour: {colour_by}" if colour_by else ""
    return f"Slices of {metric} ({direction}{colour})"


def _slice_plotly(ctx: _Context, **kwargs: Any) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    params, metric = kwargs["params"], kwargs["target_name"]
    objective = ctx.metric_names.index(metric)
    colour_by = _colour_by(ctx, params)
    fig = make_subplots(rows=1, cols=len(params), shared_yaxes=True, horizontal_spacing=0.03)
    shown: set[str] = set()
    for col, param in enumerate(params, start=1):
        for s in _points(ctx, param, objective, colour_by):
            fig.add_trace(
                go.Scatter(
                    x=s.x,
                    y=s.y,
                    mode="markers",
                    name=s.label,
                    legendgroup=s.label,
                    showlegend=s.label not in shown,
                    customdata=s.trials,
                    marker={"color": s.colour, "symbol": s.symbol, "size": 16 if s.symbol == "star-open" else 8},
                    hovertemplate=(
                        f"trial %{{customdata}}<br>{html.escape(param)}: %{{x}}<br>{html.escape(metric)}: %{{y}}<extra>{s.label}</extra>"
                    ),
                ),
                row=1,
                col=col,
            )
            shown.add(s.label)
        axis = _axis(ctx, param)
        fig.update_xaxes(title_text=param, type="-" if axis == "linear" else axis, row=1, col=col)
    fig.update_yaxes(title_text=metric, row=1, col=1)
    fig.update_layout(title=_slice_title(ctx, metric, colour_by), width=max(700, 300 * len(params)), height=450)
    return fig


def _slice_matplotlib(ctx: _Context, **kwargs: Any) -> Any:
    import matplotlib.pyplot as plt

    params, metric = kwargs["params"], kwargs["target_name"]
    objective = ctx.metric_names.index(metric)
    colour_by = _colour_by(ctx, params)
    fig, axes = plt.subplots(1, len(params), sharey=True, squeeze=False, figsize=(max(6.4, 3.2 * len(params)), 4.4))
    handles: dict[str, Any] = {}
    for ax, param in zip(axes[0], params, strict=True):
        for s in _points(ctx, param, objective, colour_by):
            style = _MPL_MARKERS[s.symbol]
            colour = {"edgecolors" if "facecolors" in style else "c": s.colour}
            handles[s.label] = ax.scatter(s.x, s.y, label=s.label, **colour, **style)
        if _axis(ctx, param) == "log":
            ax.set_xscale("log")
        ax.set_xlabel(param)
    axes[0][0].set_ylabel(metric)
    fig.suptitle(_slice_title(ctx, metric, colour_by))
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=min(len(handles), 5), bbox_to_anchor=(0.5, -0.08))
    return axes


def _contour_points_plotly(fig: Any, ctx: _Context, kwargs: dict[str, Any]) -> None:
    """Optuna draws every trial black: redraw the points coloured by option."""
    import plotly.graph_objects as go

    x_param, y_param = kwargs["params"]
    colour_by = _colour_by(ctx, kwargs["params"])
    if colour_by is None:
        return
    for trace in fig.data:
        if trace.type == "scatter":
            trace.visible = False
    for s in _contour_series(ctx, x_param, y_param, colour_by):
        fig.add_trace(
            go.Scatter(
                x=s.x,
                y=s.y,
                mode="markers",
                name=s.label,
                customdata=s.trials,
                marker={"color": s.colour, "line": {"color": "white", "width": 1}, "size": 8},
                hovertemplate=f"trial %{{customdata}}<extra>{s.label}</extra>",
            )
        )
    fig.update_layout(showlegend=True, legend={"x": 1.2})  # clear of the colour bar


def _contour_points_matplotlib(ax: Any, ctx: _Context, kwargs: dict[str, Any]) -> None:
    x_param, y_param = kwargs["params"]
    colour_by = _colour_by(ctx, kwargs["params"])
    if colour_by is None or not (_numeric(ctx, x_param) and _numeric(ctx, y_param)):
        return  # optuna puts categories at integer positions; leave its own points
    for s in _contour_series(ctx, x_param, y_param, colour_by):
        ax.scatter(s.x, s.y, c=s.colour, edgecolors="white", s=30, label=s.label, zorder=5)
    ax.legend(loc="best")


def _numeric(ctx: _Context, param: str) -> bool:
    """Whether optuna's contour gives the parameter a numeric axis (numeric choices too)."""
    from optuna.distributions import CategoricalDistribution

    dist = _distribution(ctx, param)
    if not isinstance(dist, CategoricalDistribution):
        return True
    return all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in dist.choices)


def _contour_series(ctx: _Context, x_param: str, y_param: str, colour_by: str) -> list[_Points]:
    """Completed trials per option, at the positions optuna's plotly contour uses."""
    colours = _option_colours(ctx, colour_by)
    as_x, as_y = ((lambda v: v) if _numeric(ctx, p) else str for p in (x_param, y_param))
    by_label: dict[str, list[tuple[Any, Any, int]]] = {}
    for t in ctx.flat.study.get_trials(deepcopy=False, states=_complete()):
        if x_param in t.params and y_param in t.params:
            label = f"{colour_by}={t.params.get(colour_by)}"
            by_label.setdefault(label, []).append((as_x(t.params[x_param]), as_y(t.params[y_param]), t.number))
    return [
        _Points(label, colours.get(label, STATE_COLOURS["COMPLETE"]), "circle", *map(list, zip(*points, strict=True)))
        for label, points in by_label.items()
    ]


_PLOTS: tuple[_Plot, ...] = (
    _Plot("history", "Optimization history", "plot_optimization_history", _needs_completed(1)),
    _Plot(
        "intermediate",
        "Learning curves (red dotted: pruned)",
        "plot_intermediate_values",
        _skip_curves,
        per_objective=False,
        restyle_plotly=_colour_curves_plotly,
        restyle_matplotlib=_colour_curves_matplotlib,
    ),
    _Plot(
        "parallel_coordinate",
        "Parallel coordinates",
        "plot_parallel_coordinate",
        _needs_params(1),
        lambda ctx: {"params": _focus(ctx, PARALLEL_PARAMS)},
        restyle_plotly=_title_parallel_plotly,
        restyle_matplotlib=_title_parallel_matplotlib,
        note=_parallel_note,
    ),
    _Plot(
        "importances",
        "Parameter importances (fANOVA): all trials and per option",
        _Own(_importances_plotly, _importances_matplotlib),
        _skip_importances,
        note=lambda ctx: "every set of trials: the table above and importances.json",
    ),
    _Plot(
        "slice",
        "Slices of the top parameters (grey x: pruned, star: best)",
        _Own(_slice_plotly, _slice_matplotlib),
        _needs_params(1),
        lambda ctx: {"params": _focus(ctx, SLICE_PARAMS)},
    ),
    _Plot(
        "contour",
        "Contour of the top two parameters, the learning rate always one",
        "plot_contour",
        _needs_params(2, 2),
        _contour_params,
        restyle_plotly=_contour_points_plotly,
        restyle_matplotlib=_contour_points_matplotlib,
        note=lambda ctx: " against ".join(_contour_params(ctx)["params"]),
    ),
    _Plot(
        "pareto_front",
        "Pareto front",
        "plot_pareto_front",
        _skip_pareto,
        lambda ctx: {"target_names": ctx.metric_names},
        per_objective=False,
        multi_only=True,
    ),
)


def write_report(study: optuna.Study, out_dir: str | Path) -> list[Path]:
    """Write plots as HTML and PNG, `importances.json` and `index.html` into `out_dir`;
    return the files written, `index.html` last."""
    import matplotlib

    matplotlib.use("Agg")  # headless: servers and CI have no display

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ctx = _context(study)
    drawn: list[_Drawn] = []
    skipped: list[tuple[str, str]] = []
    for plot in _PLOTS:
        if plot.multi_only and not ctx.multi:
            continue
        if reason := plot.skip(ctx):
            skipped.append((plot.title, reason))
            continue
        for suffix, kwargs in _variants(plot, ctx):
            try:
                drawn.append(_draw(plot, ctx, out, suffix, kwargs))
            except Exception as e:  # one bad plot must not cost the whole report
                skipped.append((_title(plot, suffix), f"failed: {e}"))

    importances = out / "importances.json"
    _write_importances(ctx, importances)
    index = out / "index.html"
    from hpsearch.reruns.audit import report_section

    audit = report_section(study, out)  # `hpsearch audit`'s latest result, from "<study>-audit" in the same storage
    index.write_text(_index_html(ctx, drawn, skipped, audit), encoding="utf-8")
    files = [f for d in drawn for f in (d.html, d.png)]
    if drawn:
        files.append(out / "plotly.min.js")  # shared by every HTML plot, written by plotly
    return files + [p for p in (out / "audit.png",) if "audit.png" in audit] + [importances, index]


def _context(study: optuna.Study) -> _Context:
    trials = study.get_trials(deepcopy=False)
    completed = [t for t in trials if t.state.name == "COMPLETE"]
    pruned = [t for t in trials if t.state.name == "PRUNED"]
    names = _metric_names(study)
    flat = _flatten(study)
    groups, skips = _importance_groups(flat, names)
    first = next((g for g in groups if g.trials == "all" and g.metric == names[0]), None)
    error = None if first else next((r for label, r in skips if label == "all"), None)
    ranked = list(first.scores) if first else []
    # Important parameters first, then the rest (conditional ones included) by how often sampled.
    by_count = _params_by_count(flat.study.get_trials(deepcopy=False, states=_complete()))
    top = ranked + [p for p in by_count if p not in ranked]
    return _Context(study, flat, names, trials, completed, pruned, top, error, groups, skips)


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


def _variants(plot: _Plot, ctx: _Context) -> list[tuple[str, dict[str, Any]]]:
    """(file-name suffix, kwargs) per drawing: one per objective where that applies."""
    base = plot.kwargs(ctx)
    if not plot.per_objective:
        return [("", base)]
    if not ctx.multi:
        return [("", {**base, "target_name": ctx.metric_names[0]})]
    return [(f"_{_slug(name)}", {**base, "target": _objective(i), "target_name": name}) for i, name in enumerate(ctx.metric_names)]


def _objective(i: int) -> Callable[[FrozenTrial], float]:
    return lambda t: t.values[i]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "objective"


def _draw(plot: _Plot, ctx: _Context, out: Path, suffix: str, kwargs: dict[str, Any]) -> _Drawn:
    import optuna.visualization as vis

    stem = plot.name + suffix
    if isinstance(plot.fn, _Own):
        fig = plot.fn.plotly(ctx, **kwargs)
    else:
        fig = getattr(vis, plot.fn)(ctx.flat.study, **kwargs)
    if plot.restyle_plotly:
        plot.restyle_plotly(fig, ctx, kwargs)
    html_path = out / f"{stem}.html"
    fig.write_html(html_path, include_plotlyjs="directory")  # one plotly.min.js, works offline
    png_path = out / f"{stem}.png"
    _draw_png(plot, ctx, kwargs, png_path)
    return _Drawn(_title(plot, suffix), html_path, png_path, plot.note(ctx))


def _draw_png(plot: _Plot, ctx: _Context, kwargs: dict[str, Any], path: Path) -> None:
    import matplotlib
    import matplotlib.pyplot as plt
    import numpy as np
    import optuna.visualization.matplotlib as vis_mpl
    from optuna.exceptions import ExperimentalWarning

    # rc_context: optuna's matplotlib plots switch the global style to ggplot.
    with warnings.catch_warnings(), matplotlib.rc_context():
        warnings.simplefilter("ignore", ExperimentalWarning)
        warnings.simplefilter("ignore", UserWarning)  # e.g. singular axis limits with 1 trial
        if isinstance(plot.fn, _Own):
            drawn = plot.fn.matplotlib(ctx, **kwargs)
        else:
            drawn = getattr(vis_mpl, plot.fn)(ctx.flat.study, **kwargs)
        axes = np.ravel(drawn)  # Axes or array of them
        try:
            if plot.restyle_matplotlib:
                plot.restyle_matplotlib(axes[0], ctx, kwargs)
            axes[0].figure.savefig(path, dpi=PNG_DPI, bbox_inches="tight")
        finally:
            plt.close(axes[0].figure)


def _title(plot: _Plot, suffix: str) -> str:
    return f"{plot.title} ({suffix[1:]})" if suffix else plot.title


# ---- index.html ------------------------------------------------------------------------------

_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5em; }
.plots figure { margin: 0; }
.plots img { width: 384px; border: 1px solid #ddd; }
.note { color: #a33; }
.plot-note { color: #555; font-size: 90%; }
"""


def _index_html(ctx: _Context, drawn: list[_Drawn], skipped: list[tuple[str, str]], audit: str = "") -> str:
    name = html.escape(ctx.study.study_name)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{name}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Study {name}</h1>",
        _summary_table(ctx),
    ]
    if not ctx.completed:
        parts.append(
            "<p class='note' id='no-completed'>No completed trials yet: "
            "no best value, and plots that need completed trials are skipped.</p>"
        )
    else:
        parts.append(_best_section(ctx))
    parts.append(_top_trials_table(ctx))
    parts.append(audit)
    parts.append(_importances_section(ctx))
    parts.append(_plots_section(drawn, skipped))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _table(header: list[str] | None, rows: list[list[str]]) -> str:
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def _summary_table(ctx: _Context) -> str:
    counts: dict[str, int] = {}
    for t in ctx.trials:
        state = "IMPORTED" if "imported_from" in t.user_attrs else t.state.name  # warm_start.study: completed elsewhere
        counts[state] = counts.get(state, 0) + 1
    directions = ", ".join(f"{html.escape(m)}: {d.name.lower()}" for m, d in zip(ctx.metric_names, ctx.study.directions, strict=True))
    rows = [["study", html.escape(ctx.study.study_name)], ["directions", directions], ["trials", str(len(ctx.trials))]]
    rows += [[state.lower(), str(n)] for state, n in sorted(counts.items())]
    return _table(None, rows)


def _best_section(ctx: _Context) -> str:
    from hpsearch.study.counts import own_best

    best = own_best(ctx.study)  # imported trials (warm_start.study) ran in another setting: not this study's results
    title = f"Pareto front: {len(best)} trial(s)" if ctx.multi else "Best trial"
    rows = [[str(t.number), *(_fmt(v) for v in t.values), _params(t)] for t in best]
    header = ["trial", *map(html.escape, ctx.metric_names), "params"]
    return f"<h2>{title}</h2>" + _table(header, rows)


def _top_trials(ctx: _Context) -> list[FrozenTrial]:
    """Completed trials best first (Pareto trials first when multi-objective), then pruned
    trials by their last reported value of the first metric."""
    sign = 1 if ctx.study.directions[0].name == "MINIMIZE" else -1
    pareto = {t.number for t in ctx.study.best_trials} if ctx.multi and ctx.completed else set()
    completed = sorted(ctx.completed, key=lambda t: (t.number not in pareto, sign * t.values[0]))
    pruned = [t for t in ctx.pruned if t.intermediate_values]
    pruned.sort(key=lambda t: _last_value_key(t, sign))
    return (completed + pruned)[:TOP_TRIALS]


def _last_value_key(t: FrozenTrial, sign: int) -> tuple[bool, float]:
    last = t.intermediate_values[max(t.intermediate_values)]
    return (not math.isfinite(last), sign * last if math.isfinite(last) else 0.0)  # NaN last


def _top_trials_table(ctx: _Context) -> str:
    trials = _top_trials(ctx)
    if not trials:
        return "<h2>Top trials</h2><p>No completed or pruned trials with values.</p>"
    header = ["trial", "state", "reason", *map(html.escape, ctx.metric_names), "epochs", "wall time", "params"]
    rows = [_trial_row(ctx, t) for t in trials]
    return f"<h2>Top {len(trials)} trials</h2>" + _table(header, rows)


def _trial_row(ctx: _Context, t: FrozenTrial) -> list[str]:
    if t.state.name != "PRUNED" or not t.intermediate_values:
        values = [_fmt(v) for v in t.values or [None] * len(ctx.metric_names)]
    else:  # the last reported value of the first metric, at its epoch
        epoch = max(t.intermediate_values)
        values = [f"{_fmt(t.intermediate_values[epoch])} (epoch {epoch})"]
        values += ["–"] * (len(ctx.metric_names) - 1)
    reason = t.user_attrs.get("reason", t.state.name.lower())
    epochs = t.user_attrs.get("epochs", len(t.intermediate_values))
    return [str(t.number), t.state.name.lower(), html.escape(str(reason)), *values, str(epochs), _wall(t), _params(t)]


def _wall(t: FrozenTrial) -> str:
    seconds = t.user_attrs.get("wall_s")
    if seconds is None and t.datetime_start and t.datetime_complete:
        seconds = (t.datetime_complete - t.datetime_start).total_seconds()
    return "–" if seconds is None else f"{float(seconds):.1f} s"


def _params(t: FrozenTrial) -> str:
    return "<br>".join(f"{html.escape(k)} = {html.escape(_fmt(v))}" for k, v in sorted(t.params.items()))


def _fmt(v: Any, spec: str = ".6g") -> str:
    if v is None:
        return "–"
    return f"{v:{spec}}" if isinstance(v, float) else str(v)


def _importances_section(ctx: _Context) -> str:
    """One column per set of trials (all, then each option), one row per parameter."""
    parts = ["<h2>Parameter importances (fANOVA)</h2>"]
    if ctx.flat.merged:
        merged = "; ".join(
            f"<b>{html.escape(name)}</b> = {' | '.join(map(html.escape, m.paths))}" + (" (log scale)" if m.log else "")
            for name, m in ctx.flat.merged.items()
        )
        parts.append(f"<p id='merged'>Merged across options: {merged}</p>")
    if ctx.importances:
        header = ["parameter"] + [f"{html.escape(g.trials)} · {html.escape(g.metric)} ({g.completed} trials)" for g in ctx.importances]
        rows = [[html.escape(p)] + [_fmt(g.scores.get(p), ".3f") for g in ctx.importances] for p in _importance_rows(ctx.importances)]
        parts.append(_table(header, rows).replace("<table>", "<table id='importances'>", 1))
    if ctx.importance_skips:
        items = "".join(f"<li>{html.escape(label)}: {html.escape(reason)}</li>" for label, reason in ctx.importance_skips)
        parts.append(f"<p>Not computed:</p><ul>{items}</ul>")
    parts.append("<p><a href='importances.json'>importances.json</a></p>")
    return "\n".join(parts)


def _plots_section(drawn: list[_Drawn], skipped: list[tuple[str, str]]) -> str:
    parts = ["<h2>Plots</h2>"]
    if drawn:
        figures = "".join(
            f"<figure><figcaption>{html.escape(d.title)}: "
            f"<a href='{d.html.name}'>interactive (HTML)</a> · "
            f"<a href='{d.png.name}'>image (PNG)</a>"
            + (f"<br><span class='plot-note'>{html.escape(d.note)}</span>" if d.note else "")
            + "</figcaption>"
            f"<a href='{d.html.name}'><img src='{d.png.name}' alt='{html.escape(d.title)}'></a>"
            "</figure>"
            for d in drawn
        )
        parts.append(f"<div class='plots'>{figures}</div>")
    else:
        parts.append("<p>No plots: nothing to draw yet.</p>")
    if skipped:
        items = "".join(f"<li>{html.escape(title)}: {html.escape(reason)}</li>" for title, reason in skipped)
        parts.append(f"<h3>Skipped</h3><ul class='skipped'>{items}</ul>")
    return "\n".join(parts)
