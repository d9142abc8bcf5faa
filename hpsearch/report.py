"""Plots (interactive HTML and PNG) and an index page for one study.

`write_report(study, out_dir)` draws every plot in `_PLOTS` that applies to the study with
both `optuna.visualization` (plotly -> HTML) and `optuna.visualization.matplotlib` (-> PNG),
and writes `index.html` with a summary, the top trials and links to every file. Plots that do
not apply (too few trials or parameters) are listed in the index with the reason.
"""

from __future__ import annotations

import html
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

STATE_COLOURS = {  # learning-curve colour per TrialState name
    "COMPLETE": "#1f77b4",
    "PRUNED": "#d62728",
    "RUNNING": "#7f7f7f",
}
PNG_DPI = 100  # optuna's 6.4 x 4.8 in figures -> about 640 x 480 px
TOP_TRIALS = 10


@dataclass(frozen=True)
class _Context:
    """What the plot table needs to know about the study, computed once."""

    study: optuna.Study
    metric_names: list[str]
    trials: list[FrozenTrial]
    completed: list[FrozenTrial]
    pruned: list[FrozenTrial]
    top_params: list[str]  # by importance for the first objective, most important first
    importance_error: str | None  # why importances cannot be computed, None if they can

    @property
    def multi(self) -> bool:
        return len(self.metric_names) > 1


@dataclass(frozen=True)
class _Plot:
    """One row of the plot table: the same function name exists in both optuna modules."""

    name: str  # file stem
    title: str
    fn: str  # name in optuna.visualization and optuna.visualization.matplotlib
    skip: Callable[[_Context], str | None]  # reason the plot does not apply, or None
    kwargs: Callable[[_Context], dict[str, Any]] = lambda ctx: {}
    per_objective: bool = True  # one plot per objective via target= in multi-objective studies
    multi_only: bool = False
    restyle_plotly: Callable[[Any, _Context], None] | None = None  # (figure, ctx)
    restyle_matplotlib: Callable[[Any, _Context], None] | None = None  # (axes, ctx)


@dataclass(frozen=True)
class _Drawn:
    title: str
    html: Path
    png: Path


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


def _importance_kwargs(ctx: _Context) -> dict[str, Any]:
    from optuna.importance import FanovaImportanceEvaluator

    return {"evaluator": FanovaImportanceEvaluator(seed=0)}  # seeded: same ranking every run


def _top_two(ctx: _Context) -> dict[str, Any]:
    return {"params": ctx.top_params[:2]}


def _colour_curves_plotly(fig: Any, ctx: _Context) -> None:
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
    fig.update_layout(title="Learning curves", showlegend=True, xaxis_title="epoch",
                      yaxis_title=ctx.metric_names[0])


def _colour_curves_matplotlib(ax: Any, ctx: _Context) -> None:
    from matplotlib.lines import Line2D

    states = _trial_states(ctx)
    present: set[str] = set()
    for line in ax.get_lines():
        state = states.get(line.get_label(), "RUNNING")
        line.set_color(STATE_COLOURS.get(state, STATE_COLOURS["RUNNING"]))
        line.set_linestyle(":" if state == "PRUNED" else "-")
        present.add(state)
    handles = [
        Line2D([], [], color=colour, linestyle=":" if state == "PRUNED" else "-",
               label=state.lower())
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


_PLOTS: tuple[_Plot, ...] = (
    _Plot("history", "Optimization history", "plot_optimization_history", _needs_completed(1)),
    _Plot("intermediate", "Learning curves (red dotted: pruned)", "plot_intermediate_values",
          _skip_curves, per_objective=False, restyle_plotly=_colour_curves_plotly,
          restyle_matplotlib=_colour_curves_matplotlib),
    _Plot("parallel_coordinate", "Parallel coordinates", "plot_parallel_coordinate",
          _needs_params(1)),
    _Plot("importances", "Parameter importances (fANOVA)", "plot_param_importances",
          _skip_importances, _importance_kwargs),
    _Plot("slice", "Slice of the top two parameters", "plot_slice", _needs_params(1), _top_two),
    _Plot("contour", "Contour of the top two parameters", "plot_contour", _needs_params(2, 2),
          _top_two),
    _Plot("pareto_front", "Pareto front", "plot_pareto_front", _skip_pareto,
          lambda ctx: {"target_names": ctx.metric_names}, per_objective=False, multi_only=True),
)


def write_report(study: optuna.Study, out_dir: str | Path) -> list[Path]:
    """Write plots as HTML and PNG plus `index.html` into `out_dir`; return the files written."""
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

    index = out / "index.html"
    index.write_text(_index_html(ctx, drawn, skipped), encoding="utf-8")
    files = [f for d in drawn for f in (d.html, d.png)]
    if drawn:
        files.append(out / "plotly.min.js")  # shared by every HTML plot, written by plotly
    return files + [index]


def _context(study: optuna.Study) -> _Context:
    trials = study.get_trials(deepcopy=False)
    completed = [t for t in trials if t.state.name == "COMPLETE"]
    pruned = [t for t in trials if t.state.name == "PRUNED"]
    importances, error = _importances(study, len(completed))
    # Important parameters first, then the rest (conditional ones included) by how often sampled.
    by_count = _params_by_count(completed)
    top = importances + [p for p in by_count if p not in importances]
    return _Context(study, _metric_names(study), trials, completed, pruned, top, error)


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


def _importances(study: optuna.Study, n_completed: int) -> tuple[list[str], str | None]:
    """Parameter names by fANOVA importance for the first objective, or why there are none."""
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances

    if n_completed < 2:
        return [], f"needs at least 2 completed trials, the study has {n_completed}"
    target = (lambda t: t.values[0]) if len(study.directions) > 1 else None
    try:
        scores = get_param_importances(
            study, evaluator=FanovaImportanceEvaluator(seed=0), target=target
        )
    except (ValueError, RuntimeError) as e:  # e.g. no parameter common to all trials
        return [], str(e)
    if not scores:
        return [], "no parameter is sampled in every completed trial"
    return list(scores), None


def _variants(plot: _Plot, ctx: _Context) -> list[tuple[str, dict[str, Any]]]:
    """(file-name suffix, kwargs) per drawing: one per objective where that applies."""
    base = plot.kwargs(ctx)
    if not plot.per_objective:
        return [("", base)]
    if not ctx.multi:
        return [("", {**base, "target_name": ctx.metric_names[0]})]
    return [
        (f"_{_slug(name)}", {**base, "target": _objective(i), "target_name": name})
        for i, name in enumerate(ctx.metric_names)
    ]


def _objective(i: int) -> Callable[[FrozenTrial], float]:
    return lambda t: t.values[i]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "objective"


def _draw(plot: _Plot, ctx: _Context, out: Path, suffix: str, kwargs: dict[str, Any]) -> _Drawn:
    import optuna.visualization as vis

    stem = plot.name + suffix
    fig = getattr(vis, plot.fn)(ctx.study, **kwargs)
    if plot.restyle_plotly:
        plot.restyle_plotly(fig, ctx)
    html_path = out / f"{stem}.html"
    fig.write_html(html_path, include_plotlyjs="directory")  # one plotly.min.js, works offline
    png_path = out / f"{stem}.png"
    _draw_png(plot, ctx, kwargs, png_path)
    return _Drawn(_title(plot, suffix), html_path, png_path)


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
        axes = np.ravel(getattr(vis_mpl, plot.fn)(ctx.study, **kwargs))  # Axes or array of them
        try:
            if plot.restyle_matplotlib:
                plot.restyle_matplotlib(axes[0], ctx)
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
"""


def _index_html(ctx: _Context, drawn: list[_Drawn], skipped: list[tuple[str, str]]) -> str:
    name = html.escape(ctx.study.study_name)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{name}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Study {name}</h1>",
        _summary_table(ctx),
    ]
    if not ctx.completed:
        parts.append("<p class='note' id='no-completed'>No completed trials yet: "
                     "no best value, and plots that need completed trials are skipped.</p>")
    else:
        parts.append(_best_section(ctx))
    parts.append(_top_trials_table(ctx))
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
        counts[t.state.name] = counts.get(t.state.name, 0) + 1
    directions = ", ".join(
        f"{html.escape(m)}: {d.name.lower()}"
        for m, d in zip(ctx.metric_names, ctx.study.directions)
    )
    rows = [["study", html.escape(ctx.study.study_name)], ["directions", directions],
            ["trials", str(len(ctx.trials))]]
    rows += [[state.lower(), str(n)] for state, n in sorted(counts.items())]
    return _table(None, rows)


def _best_section(ctx: _Context) -> str:
    if ctx.multi:
        best = sorted(ctx.study.best_trials, key=lambda t: t.number)
        title = f"Pareto front: {len(best)} trial(s)"
    else:
        best, title = [ctx.study.best_trial], "Best trial"
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
    header = ["trial", "state", "reason", *map(html.escape, ctx.metric_names), "epochs",
              "wall time", "params"]
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
    return [str(t.number), t.state.name.lower(), html.escape(str(reason)), *values,
            str(epochs), _wall(t), _params(t)]


def _wall(t: FrozenTrial) -> str:
    seconds = t.user_attrs.get("wall_s")
    if seconds is None and t.datetime_start and t.datetime_complete:
        seconds = (t.datetime_complete - t.datetime_start).total_seconds()
    return "–" if seconds is None else f"{float(seconds):.1f} s"


def _params(t: FrozenTrial) -> str:
    return "<br>".join(
        f"{html.escape(k)} = {html.escape(_fmt(v))}" for k, v in sorted(t.params.items())
    )


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _plots_section(drawn: list[_Drawn], skipped: list[tuple[str, str]]) -> str:
    parts = ["<h2>Plots</h2>"]
    if drawn:
        figures = "".join(
            f"<figure><figcaption>{html.escape(d.title)}: "
            f"<a href='{d.html.name}'>interactive (HTML)</a> · "
            f"<a href='{d.png.name}'>image (PNG)</a></figcaption>"
            f"<a href='{d.html.name}'><img src='{d.png.name}' alt='{html.escape(d.title)}'></a>"
            "</figure>"
            for d in drawn
        )
        parts.append(f"<div class='plots'>{figures}</div>")
    else:
        parts.append("<p>No plots: nothing to draw yet.</p>")
    if skipped:
        items = "".join(
            f"<li>{html.escape(title)}: {html.escape(reason)}</li>" for title, reason in skipped
        )
        parts.append(f"<h3>Skipped</h3><ul class='skipped'>{items}</ul>")
    return "\n".join(parts)
