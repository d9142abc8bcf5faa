"""Parallel coordinates of the top parameters."""

from __future__ import annotations

from typing import Any

from hpsearch.report.context import _Context, _focus

PARALLEL_PARAMS = 8  # more axes than this are unreadable; the rest are named under the plot


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
