"""Contours of the learning rate against the top other parameter."""

from __future__ import annotations

from typing import Any

from hpsearch.report.context import STATE_COLOURS, _colour_by, _Context, _is_lr, _numeric, _option_colours
from hpsearch.report.flatten import _complete
from hpsearch.report.slices import _Points


def _contour_params(ctx: _Context) -> dict[str, Any]:
    """The learning rate and the most important other parameter, or the top two. Not the
    choice the learning rate is merged over: its options are the points' colours instead."""
    lr = [p for p in ctx.top_params if _is_lr(p)][:1]
    own = {ctx.flat.merged[p].choice for p in lr if p in ctx.flat.merged}
    others = [p for p in ctx.top_params if p not in lr]
    others = [p for p in others if p not in own] or others
    return {"params": lr + others[: 2 - len(lr)]}


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
