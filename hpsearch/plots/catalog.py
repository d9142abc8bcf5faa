"""The plot table: which plots the report draws, when each applies, and drawing one as HTML and PNG."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpsearch.plots.bars import importances_matplotlib, importances_plotly
from hpsearch.plots.context import Context, focus
from hpsearch.plots.contour import contour_note, contour_points_matplotlib, contour_points_plotly, contour_sets, contour_study
from hpsearch.plots.curves import colour_curves_matplotlib, colour_curves_plotly, skip_curves
from hpsearch.plots.importances import objective_of
from hpsearch.plots.parallel import PARALLEL_PARAMS, parallel_matplotlib, parallel_note, parallel_plotly
from hpsearch.plots.slices import SLICE_PARAMS, slice_matplotlib, slice_plotly

PNG_DPI = 100  # optuna's 6.4 x 4.8 in figures -> about 640 x 480 px


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
    skip: Callable[[Context], str | None]  # reason the plot does not apply, or None
    kwargs: Callable[[Context], dict[str, Any]] = lambda ctx: {}
    # (file-name suffix, kwargs) per drawing before the per-objective ones, e.g. one contour per option
    sets: Callable[[Context], list[tuple[str, dict[str, Any]]]] = lambda ctx: [("", {})]
    # what optuna's function draws from: the flattened study, or a subset of it (kwargs["option"])
    study: Callable[[Context, dict[str, Any]], Any] = lambda ctx, kwargs: ctx.flat.study
    per_objective: bool = True  # one plot per objective via target= in multi-objective studies
    multi_only: bool = False
    restyle_plotly: Callable[[Any, Context, dict[str, Any]], None] | None = None
    restyle_matplotlib: Callable[[Any, Context, dict[str, Any]], None] | None = None
    note: Callable[[Context, dict[str, Any]], str | None] = lambda ctx, kwargs: None  # a line under the plot


@dataclass(frozen=True)
class Drawn:
    title: str
    html: Path
    png: Path
    note: str | None = None


def _needs_completed(n: int) -> Callable[[Context], str | None]:
    def skip(ctx: Context) -> str | None:
        if len(ctx.completed) < n:
            return f"needs at least {n} completed trial(s), the study has {len(ctx.completed)}"
        return None

    return skip


def _needs_params(n: int, completed: int = 1) -> Callable[[Context], str | None]:
    def skip(ctx: Context) -> str | None:
        if reason := _needs_completed(completed)(ctx):
            return reason
        if len(ctx.top_params) < n:
            return f"needs at least {n} parameter(s), the study has {len(ctx.top_params)}"
        return None

    return skip


def _skip_importances(ctx: Context) -> str | None:
    return _needs_completed(2)(ctx) or ctx.importance_error


def _skip_pareto(ctx: Context) -> str | None:
    if len(ctx.metric_names) > 3:
        return f"draws 2 or 3 objectives, the study has {len(ctx.metric_names)}"
    return _needs_completed(1)(ctx)


PLOTS: tuple[_Plot, ...] = (
    _Plot("history", "Optimization history", "plot_optimization_history", _needs_completed(1)),
    _Plot(
        "intermediate",
        "Learning curves (red dotted: pruned)",
        "plot_intermediate_values",
        skip_curves,
        per_objective=False,
        restyle_plotly=colour_curves_plotly,
        restyle_matplotlib=colour_curves_matplotlib,
    ),
    _Plot(
        "parallel_coordinate",
        "Parallel coordinates",
        _Own(parallel_plotly, parallel_matplotlib),
        _needs_params(1),
        lambda ctx: {"params": focus(ctx, PARALLEL_PARAMS)},
        note=parallel_note,
    ),
    _Plot(
        "importances",
        "Parameter importances (fANOVA): all trials and per option",
        _Own(importances_plotly, importances_matplotlib),
        _skip_importances,
        note=lambda ctx, kwargs: "every set of trials: the table above and importances.json",
    ),
    _Plot(
        "slice",
        "Slices of the top parameters (grey x: pruned, star: best)",
        _Own(slice_plotly, slice_matplotlib),
        _needs_params(1),
        lambda ctx: {"params": focus(ctx, SLICE_PARAMS)},
    ),
    _Plot(
        "contour",
        "Contour of the top two parameters, the learning rate always one",
        "plot_contour",
        _needs_params(2, 2),
        sets=contour_sets,
        study=contour_study,
        restyle_plotly=contour_points_plotly,
        restyle_matplotlib=contour_points_matplotlib,
        note=contour_note,
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


def variants(plot: _Plot, ctx: Context) -> list[tuple[str, dict[str, Any]]]:
    """(file-name suffix, kwargs) per drawing: per set (e.g. option), then per objective where that applies."""
    return [(suffix + more, kw) for suffix, kwargs in plot.sets(ctx) for more, kw in _objectives(plot, ctx, {**plot.kwargs(ctx), **kwargs})]


def _objectives(plot: _Plot, ctx: Context, base: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if not plot.per_objective:
        return [("", base)]
    if not ctx.multi:
        return [("", {**base, "target_name": ctx.metric_names[0]})]
    return [(f"_{_slug(name)}", {**base, "target": objective_of(i), "target_name": name}) for i, name in enumerate(ctx.metric_names)]


def _optuna_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k != "option"}  # "option": ours, which trials to draw


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "objective"


def draw_plot(plot: _Plot, ctx: Context, out: Path, suffix: str, kwargs: dict[str, Any]) -> Drawn:
    import optuna.visualization as vis

    stem = plot.name + suffix
    if isinstance(plot.fn, _Own):
        fig = plot.fn.plotly(ctx, **kwargs)
    else:
        fig = getattr(vis, plot.fn)(plot.study(ctx, kwargs), **_optuna_kwargs(kwargs))
    if plot.restyle_plotly:
        plot.restyle_plotly(fig, ctx, kwargs)
    html_path = out / f"{stem}.html"
    fig.write_html(html_path, include_plotlyjs="directory")  # one plotly.min.js, works offline
    png_path = out / f"{stem}.png"
    _draw_png(plot, ctx, kwargs, png_path)
    return Drawn(plot_title(plot, suffix), html_path, png_path, plot.note(ctx, kwargs))


def _draw_png(plot: _Plot, ctx: Context, kwargs: dict[str, Any], path: Path) -> None:
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
            drawn = getattr(vis_mpl, plot.fn)(plot.study(ctx, kwargs), **_optuna_kwargs(kwargs))
        axes = np.ravel(drawn)  # Axes or array of them
        try:
            if plot.restyle_matplotlib:
                plot.restyle_matplotlib(axes[0], ctx, kwargs)
            axes[0].figure.savefig(path, dpi=PNG_DPI, bbox_inches="tight")
        finally:
            plt.close(axes[0].figure)


def plot_title(plot: _Plot, suffix: str) -> str:
    return f"{plot.title} ({suffix[1:]})" if suffix else plot.title
