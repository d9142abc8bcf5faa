"""Parallel coordinates of the top parameters, drawn here for both backends from one layout.

Optuna's own plots drew a missing parameter (momentum under adamw) as "None", put categories in
the order first seen (128, 32, 64), faded the worst lines to near-white and overlapped title,
ticks and colour bar at 12 axes. Here: every axis maps to 0..1 (log where the parameter is
sampled on a log scale, choices in natural order), a trial without the parameter leaves a gap in
its line, the colour scale is viridis (no white end) with the best trials drawn on top, and the
figure widens with the number of axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpsearch.plots.context import Context, choice_labels, distribution_of, focus
from hpsearch.plots.flatten import completed_states

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

PARALLEL_PARAMS = 12  # legible up to this many axes (width grows ~1 in per axis); the rest are named under the plot
TICKS = 5  # ticks on a numeric axis
INT_TICKS_MAX = 8  # an int parameter with at most this many values gets a tick per value
COLOURS = "viridis"  # dark to yellow: both ends visible on white; the best trials are yellow


@dataclass(frozen=True)
class _Axis:
    name: str
    positions: list[float]  # per line: 0 (bottom) to 1 (top); NaN where the trial lacks the parameter
    ticks: list[tuple[float, str]]  # (position, label)


@dataclass(frozen=True)
class _Lines:
    title: str
    metric: str
    maximize: bool
    trials: list[int]  # trial numbers, worst first: the best are drawn last, on top
    values: list[float]  # the metric per line
    axes: list[_Axis]  # the metric's, then one per parameter


def parallel_note(ctx: Context, kwargs: dict[str, Any]) -> str | None:
    hidden = [p for p in ctx.top_params if p not in focus(ctx, PARALLEL_PARAMS)]
    if not hidden:
        return "a gap in a line: that trial has no such parameter (it belongs to another option)"
    return f"top {PARALLEL_PARAMS} of {len(ctx.top_params)} parameters by importance; not drawn: {', '.join(hidden)}"


def _lines(ctx: Context, params: list[str], metric: str) -> _Lines:
    i = ctx.metric_names.index(metric)
    maximize = ctx.study.directions[i].name == "MAXIMIZE"
    trials = [t for t in ctx.flat.study.get_trials(deepcopy=False, states=completed_states()) if math.isfinite(t.values[i])]
    trials.sort(key=lambda t: t.values[i] if maximize else -t.values[i])  # worst first
    values = [t.values[i] for t in trials]
    params = [p for p in params if any(p in t.params for t in trials)]  # an axis no line crosses has no value to show
    axes = [_numeric_axis(metric, values, log=False, integer=False)] + [_param_axis(ctx, p, trials) for p in params]
    title = f"Parallel coordinates: top {len(params)} of {len(ctx.top_params)} parameters"
    return _Lines(title, metric, maximize, [t.number for t in trials], values, axes)


def _param_axis(ctx: Context, param: str, trials: list[FrozenTrial]) -> _Axis:
    from optuna.distributions import CategoricalDistribution, IntDistribution

    dist = distribution_of(ctx, param)
    raw = [t.params.get(param) for t in trials]
    if isinstance(dist, CategoricalDistribution):
        order = choice_labels(ctx, param)
        where = {c: k / max(1, len(order) - 1) if len(order) > 1 else 0.5 for k, c in enumerate(order)}
        return _Axis(param, [math.nan if v is None else where[v] for v in raw], [(where[c], str(c)) for c in order])
    numbers = [math.nan if v is None else float(v) for v in raw]
    return _numeric_axis(param, numbers, log=bool(getattr(dist, "log", False)), integer=isinstance(dist, IntDistribution))


def _numeric_axis(name: str, values: list[float], log: bool, integer: bool) -> _Axis:
    """Positions between the lowest and highest value drawn (log10 for a log parameter)."""
    scale = (lambda v: math.log10(v)) if log else (lambda v: v)
    present = [scale(v) for v in values if math.isfinite(v)]
    if not present:
        return _Axis(name, [math.nan] * len(values), [])
    lo, hi = min(present), max(present)
    span = hi - lo

    def at(v: float) -> float:
        return 0.5 if span == 0 else (scale(v) - lo) / span

    positions = [at(v) if math.isfinite(v) else math.nan for v in values]
    if span == 0:
        return _Axis(name, positions, [(0.5, _label(10**lo if log else lo, integer))])  # the one value drawn (values[0] may be a gap)
    if integer and not log and span <= INT_TICKS_MAX:
        return _Axis(name, positions, [(at(v), str(v)) for v in range(int(lo), int(hi) + 1)])
    ticks = [lo + span * k / (TICKS - 1) for k in range(TICKS)]
    return _Axis(name, positions, [((x - lo) / span, _label(10**x if log else x, integer)) for x in ticks])


def _label(v: float, integer: bool) -> str:
    return str(round(v)) if integer else f"{v:.3g}"


def _colour_scale(lines: _Lines) -> list[str]:
    """Hex colour per line: viridis over the metric's range, reversed when lower is better, so the best are yellow."""
    from matplotlib import colormaps, colors

    lo, hi = min(lines.values), max(lines.values)
    cmap = colormaps[COLOURS if lines.maximize else COLOURS + "_r"]
    return [colors.to_hex(cmap(0.5 if hi == lo else (v - lo) / (hi - lo))) for v in lines.values]


def parallel_plotly(ctx: Context, **kwargs: Any) -> Any:
    import plotly.graph_objects as go

    lines = _lines(ctx, kwargs["params"], kwargs["target_name"])
    n = len(lines.axes)
    traces = []  # built first and added at once: plotly validates the whole figure on every add_*
    for k, (number, value, colour) in enumerate(zip(lines.trials, lines.values, _colour_scale(lines), strict=True)):
        ys = [None if math.isnan(a.positions[k]) else a.positions[k] for a in lines.axes]
        traces.append(
            go.Scatter(
                x=list(range(n)),
                y=ys,
                mode="lines+markers",  # a marker shows a value between two gaps
                connectgaps=False,  # a missing parameter is a gap
                line={"color": colour, "width": 1.5},
                marker={"color": colour, "size": 4},
                opacity=0.85,
                showlegend=False,
                hovertemplate=f"trial {number}: {lines.metric} {value:.4g}<extra></extra>",
            )
        )
    traces.append(  # the colour bar
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            showlegend=False,
            marker={
                "colorscale": "Viridis" if lines.maximize else "Viridis_r",
                "cmin": min(lines.values),
                "cmax": max(lines.values),
                "color": [min(lines.values)],
                "showscale": True,
                "colorbar": {"title": {"text": lines.metric}, "x": 1.0, "xpad": 20},
            },
        )
    )
    axes = [{"type": "line", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": {"color": "#333", "width": 1}} for x in range(n)]
    ticks = [
        {
            "x": x,
            "y": pos,
            "text": label,
            "showarrow": False,
            "xanchor": "left",
            "xshift": 4,
            "font": {"size": 10},
            "bgcolor": "rgba(255,255,255,0.7)",
        }
        for x, a in enumerate(lines.axes)
        for pos, label in a.ticks
    ]
    fig = go.Figure(traces)
    fig.update_layout(
        shapes=axes,
        annotations=ticks,
        title={"text": lines.title, "y": 0.97},
        margin={"t": 70, "b": 110},
        width=max(700, 95 * n + 160),
        height=520,
        plot_bgcolor="white",
        xaxis={
            "tickvals": list(range(n)),
            "ticktext": [a.name for a in lines.axes],
            "tickangle": -30,
            "range": [-0.3, n - 0.4],
            "showgrid": False,
            "zeroline": False,
        },
        yaxis={"visible": False, "range": [-0.05, 1.05]},
    )
    return fig


def parallel_matplotlib(ctx: Context, **kwargs: Any) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib import cm, colormaps, colors

    lines = _lines(ctx, kwargs["params"], kwargs["target_name"])
    n = len(lines.axes)
    fig, ax = plt.subplots(figsize=(max(6.4, 1.0 * n + 1.8), 5.0))
    for k, colour in enumerate(_colour_scale(lines)):
        ys = [a.positions[k] for a in lines.axes]  # NaN: a gap; a marker shows a value between two gaps
        ax.plot(range(n), ys, color=colour, linewidth=1.2, alpha=0.85, marker="o", markersize=2.5)
    for x, a in enumerate(lines.axes):
        ax.axvline(x, color="#333333", linewidth=1, zorder=3)
        for pos, label in a.ticks:
            ax.plot([x - 0.03, x], [pos, pos], color="#333333", linewidth=1, zorder=3)
            ax.text(
                x + 0.05,
                pos,
                label,
                fontsize=7,
                va="center",
                ha="left",
                zorder=4,
                bbox={"fc": "white", "ec": "none", "alpha": 0.75, "pad": 0.4},
            )
    ax.set_xticks(range(n), [a.name for a in lines.axes], rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.2, n - 0.35)  # room for the last axis's tick labels, clear of the colour bar
    ax.set_ylim(-0.04, 1.04)
    ax.set_yticks([])
    for side in ("left", "right", "top", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(lines.title, pad=12)
    scale = cm.ScalarMappable(
        colors.Normalize(min(lines.values), max(lines.values)), colormaps[COLOURS if lines.maximize else COLOURS + "_r"]
    )
    fig.colorbar(scale, ax=ax, pad=0.01, fraction=0.03, label=f"{lines.metric} ({'higher' if lines.maximize else 'lower'} is better)")
    return ax
