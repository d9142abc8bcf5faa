"""Slices: the metric against each top parameter, points coloured by option, pruned trials in grey."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

from hpsearch.plots.context import PRUNED_COLOUR, STATE_COLOURS, Context, best_of, choice_labels, colour_key, option_colours, param_axis

SLICE_PARAMS = 4  # panels in the slice plot


@dataclass(frozen=True)
class Points:
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


def _points(ctx: Context, param: str, objective: int, colour_by: str | None) -> list[Points]:
    """Completed trials per option, pruned ones (first metric: their last reported value)
    in grey, and the best trial as a star."""
    category = param_axis(ctx, param) == "category"
    colours = option_colours(ctx, colour_by)
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
        series.append(Points(label, colour, "x-thin-open" if pruned else "circle", xs, ys, numbers))
    series.sort(key=lambda s: s.label.startswith("pruned"))  # pruned drawn first, underneath
    if (best := best_of(ctx, objective)) is not None and param in best.params:
        x = str(best.params[param]) if category else best.params[param]
        series.append(Points("best", "#000000", "star-open", [x], [best.values[objective]], [best.number]))
    return series


def _slice_title(ctx: Context, metric: str, colour_by: str | None) -> str:
    i = ctx.metric_names.index(metric)
    direction = ctx.study.directions[i].name.lower()
    colour = f", colour: {colour_by}" if colour_by else ""
    return f"Slices of {metric} ({direction}{colour})"


def slice_plotly(ctx: Context, **kwargs: Any) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    params, metric = kwargs["params"], kwargs["target_name"]
    objective = ctx.metric_names.index(metric)
    colour_by = colour_key(ctx, params)
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
        axis = param_axis(ctx, param)
        fig.update_xaxes(title_text=param, type="-" if axis == "linear" else axis, row=1, col=col)
        if axis == "category":  # 32, 64, 128, not the order first seen
            fig.update_xaxes(categoryorder="array", categoryarray=[str(c) for c in choice_labels(ctx, param)], row=1, col=col)
    fig.update_yaxes(title_text=metric, row=1, col=1)
    fig.update_layout(title=_slice_title(ctx, metric, colour_by), width=max(700, 300 * len(params)), height=450)
    return fig


def slice_matplotlib(ctx: Context, **kwargs: Any) -> Any:
    import matplotlib.pyplot as plt

    params, metric = kwargs["params"], kwargs["target_name"]
    objective = ctx.metric_names.index(metric)
    colour_by = colour_key(ctx, params)
    fig, axes = plt.subplots(1, len(params), sharey=True, squeeze=False, figsize=(max(6.4, 3.2 * len(params)), 4.4))
    handles: dict[str, Any] = {}
    for ax, param in zip(axes[0], params, strict=True):
        if param_axis(ctx, param) == "category":  # matplotlib places categories in the order first plotted: 32, 64, 128
            order = [str(c) for c in choice_labels(ctx, param)]
            ax.plot(order, [math.nan] * len(order), linestyle="none")
        for s in _points(ctx, param, objective, colour_by):
            style = _MPL_MARKERS[s.symbol]
            colour = {"edgecolors" if "facecolors" in style else "c": s.colour}
            handles[s.label] = ax.scatter(s.x, s.y, label=s.label, **colour, **style)
        if param_axis(ctx, param) == "log":
            ax.set_xscale("log")
        ax.set_xlabel(param)
    axes[0][0].set_ylabel(metric)
    fig.suptitle(_slice_title(ctx, metric, colour_by))
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=min(len(handles), 5), bbox_to_anchor=(0.5, -0.08))
    return axes
