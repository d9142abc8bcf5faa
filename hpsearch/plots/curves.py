"""Learning curves: optuna's intermediate-value plot coloured by trial state, epochs on integer ticks."""

from __future__ import annotations

import math
from typing import Any

from hpsearch.plots.context import STATE_COLOURS, Context, trial_states


def skip_curves(ctx: Context) -> str | None:
    if not any(t.intermediate_values for t in ctx.trials):
        return "no trial reported intermediate values"
    return None


def colour_curves_plotly(fig: Any, ctx: Context, kwargs: dict[str, Any]) -> None:
    """Colour each learning curve by its trial's state; pruned curves dotted."""
    states = trial_states(ctx)
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
    fig.update_xaxes(tickmode="linear", tick0=0, dtick=_epoch_step(ctx))  # whole epochs: no tick at 1.25


def colour_curves_matplotlib(ax: Any, ctx: Context, kwargs: dict[str, Any]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    states = trial_states(ctx)
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
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs: no tick at 1.25
    ax.set_ylabel(ctx.metric_names[0])


def _epoch_step(ctx: Context) -> int:
    """Epochs between ticks: 1 up to 10 epochs, then about 10 ticks."""
    last = max((max(t.intermediate_values) for t in ctx.trials if t.intermediate_values), default=1)
    return max(1, math.ceil(last / 10))
