"""Contours of the learning rate against the top other parameter: one per optimizer option.

Options of one choice have their own learning-rate ranges (sgd 0.01-0.5, adamw 3e-4-1e-2): one
surface interpolated across both would invent values between them that no option ever ran.
So when the learning rate is merged over a choice, each option with enough completed trials gets
its own contour over its own trials, its points in the option's colour; otherwise one contour of
the top two parameters. The other axis is numeric where it can be: a contour between category
positions is an interpolation between unordered things.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpsearch.plots.context import STATE_COLOURS, Context, distribution_of, is_lr, is_numeric, option_colours, param_axis
from hpsearch.plots.flatten import completed_states
from hpsearch.plots.slices import Points

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

CONTOUR_MIN_TRIALS = 3  # completed trials an option needs for a contour of its own


def contour_sets(ctx: Context) -> list[tuple[str, dict[str, Any]]]:
    """(file-name suffix, kwargs) per contour: one per option of the choice the learning rate is
    merged over (suffix `_optimizer-sgd`), else one of the top two parameters."""
    lr = next((p for p in ctx.top_params if is_lr(p)), None)
    merged = ctx.flat.merged.get(lr) if lr else None
    if lr is None or merged is None:
        return [("", {"params": _pair(ctx, lr, ctx.top_params, ctx.completed)})]
    sets = []
    for choice, option in ctx.flat.options:
        if choice != merged.choice:
            continue
        trials = [t for t in _completed(ctx) if t.params.get(choice) == option and lr in t.params]
        if len(trials) >= CONTOUR_MIN_TRIALS:
            ranked = _ranking(ctx, f"{choice}={option}")
            others = [p for p in ranked if p != choice and all(p in t.params for t in trials)]
            sets.append((f"_{choice}-{option}", {"params": _pair(ctx, lr, others, trials), "option": (choice, option)}))
    return sets or [("", {"params": _pair(ctx, lr, [p for p in ctx.top_params if p != merged.choice], ctx.completed)})]


def _completed(ctx: Context) -> list[FrozenTrial]:
    return ctx.flat.study.get_trials(deepcopy=False, states=completed_states())


def _ranking(ctx: Context, trials: str) -> list[str]:
    """Parameters by importance within one set of trials (its own ranking when computed), then the rest."""
    own = next((list(g.scores) for g in ctx.importances if g.trials == trials and g.metric == ctx.metric_names[0]), [])
    return own + [p for p in ctx.top_params if p not in own]


def _pair(ctx: Context, lr: str | None, ranked: list[str], trials: list[FrozenTrial]) -> list[str]:
    """The learning rate (if any) and the most important other parameter, a numeric one first;
    sorted by name, as optuna puts them on x and y."""
    others = [p for p in ranked if p != lr and len({t.params.get(p) for t in trials}) > 1]
    others = sorted(others, key=lambda p: not is_numeric(ctx, p))  # stable: importance order within each kind
    return sorted(([lr] if lr else []) + others[: 1 if lr else 2])


def contour_study(ctx: Context, kwargs: dict[str, Any]) -> optuna.Study:
    """The flattened study, or only one option's trials when the contour is per option."""
    import optuna

    if "option" not in kwargs:
        return ctx.flat.study
    choice, option = kwargs["option"]
    subset = optuna.create_study(directions=ctx.study.directions)
    subset.add_trials([t for t in ctx.flat.study.get_trials(deepcopy=False) if t.params.get(choice) == option])
    return subset


def _contour_title(kwargs: dict[str, Any]) -> str:
    x, y = kwargs["params"]
    where = f", {kwargs['option'][0]}={kwargs['option'][1]} trials only" if "option" in kwargs else ""
    return f"Contour of {kwargs.get('target_name', 'value')}: {y} against {x}{where}"


def contour_note(ctx: Context, kwargs: dict[str, Any]) -> str:
    x, y = kwargs["params"]
    if "option" not in kwargs:
        return f"{y} against {x}"
    choice, option = kwargs["option"]
    lr = next((p for p in (x, y) if is_lr(p)), x)
    return f"{y} against {x}; {choice}={option} trials only: each option has its own {lr} range"


def contour_points_plotly(fig: Any, ctx: Context, kwargs: dict[str, Any]) -> None:
    """Optuna draws every trial black: redraw the points in their option's colour, named in the legend."""
    import plotly.graph_objects as go

    for trace in fig.data:
        if trace.type == "scatter":
            trace.visible = False
    for s in _contour_series(ctx, kwargs):
        fig.add_trace(
            go.Scatter(
                x=s.x,
                y=s.y,
                mode="markers",
                name=s.label,
                customdata=s.trials,
                marker={"color": s.colour, "line": {"color": "white", "width": 1}, "size": 9},
                hovertemplate=f"trial %{{customdata}}<extra>{s.label}</extra>",
            )
        )
    fig.update_layout(title=_contour_title(kwargs), showlegend=True, legend={"x": 1.2})  # clear of the colour bar


def contour_points_matplotlib(ax: Any, ctx: Context, kwargs: dict[str, Any]) -> None:
    from matplotlib.collections import PathCollection
    from matplotlib.ticker import MaxNLocator
    from optuna.distributions import IntDistribution

    ax.set_title(_contour_title(kwargs), fontsize=10)
    for axis, param, limits in zip((ax.xaxis, ax.yaxis), kwargs["params"], (ax.get_xlim(), ax.get_ylim()), strict=True):
        if isinstance(distribution_of(ctx, param), IntDistribution):
            axis.set_major_locator(MaxNLocator(integer=True))  # no tick at 2.5 warmup epochs
        elif param_axis(ctx, param) == "log" and max(limits) < 100 * min(limits):
            _few_decades(axis)
    if not all(is_numeric(ctx, p) for p in kwargs["params"]):
        return  # optuna puts categories at integer positions: leave its own points
    for c in [c for c in ax.collections if isinstance(c, PathCollection)]:
        c.remove()  # optuna's black points
    for s in _contour_series(ctx, kwargs):
        ax.scatter(s.x, s.y, c=s.colour, edgecolors="white", linewidths=0.8, s=36, label=s.label, zorder=5)
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.12), ncol=4, frameon=False)


def _contour_series(ctx: Context, kwargs: dict[str, Any]) -> list[Points]:
    """Completed trials of the contour, per option of the choice they are coloured by."""
    x_param, y_param = kwargs["params"]
    choice = kwargs["option"][0] if "option" in kwargs else next((c for c, _ in ctx.flat.options), None)
    colours = option_colours(ctx, choice)
    as_x, as_y = ((lambda v: v) if is_numeric(ctx, p) else str for p in (x_param, y_param))
    study = contour_study(ctx, kwargs)
    by_label: dict[str, list[tuple[Any, Any, int]]] = {}
    for t in study.get_trials(deepcopy=False, states=completed_states()):
        if x_param in t.params and y_param in t.params:
            label = f"{choice}={t.params[choice]}" if choice in t.params else "complete"
            by_label.setdefault(label, []).append((as_x(t.params[x_param]), as_y(t.params[y_param]), t.number))
    return [
        Points(label, colours.get(label, STATE_COLOURS["COMPLETE"]), "circle", *map(list, zip(*points, strict=True)))
        for label, points in by_label.items()
    ]


def _few_decades(axis: Any) -> None:
    """A log axis over less than two decades: matplotlib labels every minor tick (2x10^-2, 3x10^-2, ...),
    which overlap; label 1, 2 and 5 per decade as plain numbers instead (0.02, 0.05, 0.1)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())
