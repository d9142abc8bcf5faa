"""The importance bar chart: all trials and each option of the main choice, side by side."""

from __future__ import annotations

import html
import math
from typing import Any

from hpsearch.plots.context import ALL_TRIALS_COLOUR, Context, colour_key, option_colours
from hpsearch.plots.importances import Importances


def _groups_for(ctx: Context, metric: str) -> list[Importances]:
    """The sets drawn for one metric: all trials, and each option of the main choice (more
    sets make the bars unreadable; the index table has every set)."""
    main = colour_key(ctx, ctx.top_params)
    groups = [g for g in ctx.importances if g.metric == metric and (g.trials == "all" or g.trials.startswith(f"{main}="))]
    if not groups:
        reasons = [r for label, r in ctx.importance_skips if label == f"all ({metric})"]
        raise ValueError(reasons[0] if reasons else f"no importances for {metric}")
    return groups


def _bar_colours(ctx: Context) -> dict[str, str]:
    return {"all": ALL_TRIALS_COLOUR, **option_colours(ctx, colour_key(ctx, ctx.top_params))}


def importance_rows(groups: list[Importances]) -> list[str]:
    """Parameters in the order of the first group's ranking, then any only the others have."""
    return list(dict.fromkeys(p for g in groups for p in g.scores))


def importances_plotly(ctx: Context, **kwargs: Any) -> Any:
    import plotly.graph_objects as go

    metric = kwargs["target_name"]
    groups = _groups_for(ctx, metric)
    colours = _bar_colours(ctx)
    params = importance_rows(groups)[::-1]  # plotly draws the first row at the bottom
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


def importances_matplotlib(ctx: Context, **kwargs: Any) -> Any:
    import matplotlib.pyplot as plt

    metric = kwargs["target_name"]
    groups = _groups_for(ctx, metric)
    params = importance_rows(groups)
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
