"""The report's index page, and `write_report`, which writes every plot, `importances.json` and the page."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

from hpsearch.plots.bars import importance_rows
from hpsearch.plots.catalog import PLOTS, Drawn, draw_plot, plot_title, variants
from hpsearch.plots.context import Context, build_context

TOP_TRIALS = 10


def _write_importances(ctx: Context, path: Path) -> None:
    data = {
        "evaluator": "fanova",
        "merged": {name: m.paths for name, m in ctx.flat.merged.items()},
        "groups": [{"trials": g.trials, "metric": g.metric, "completed": g.completed, "importances": g.scores} for g in ctx.importances],
        "skipped": [{"trials": label, "reason": reason} for label, reason in ctx.importance_skips],
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def write_report(study: optuna.Study, out_dir: str | Path) -> list[Path]:
    """Write plots as HTML and PNG, `importances.json` and `index.html` into `out_dir`;
    return the files written, `index.html` last."""
    import matplotlib

    matplotlib.use("Agg")  # headless: servers and CI have no display

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ctx = build_context(study)
    drawn: list[Drawn] = []
    skipped: list[tuple[str, str]] = []
    for plot in PLOTS:
        if plot.multi_only and not ctx.multi:
            continue
        if reason := plot.skip(ctx):
            skipped.append((plot.title, reason))
            continue
        for suffix, kwargs in variants(plot, ctx):
            try:
                drawn.append(draw_plot(plot, ctx, out, suffix, kwargs))
            except Exception as e:  # one bad plot must not cost the whole report
                skipped.append((plot_title(plot, suffix), f"failed: {e}"))

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


def _index_html(ctx: Context, drawn: list[Drawn], skipped: list[tuple[str, str]], audit: str = "") -> str:
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
    parts.append(_trust_section(ctx))
    parts.append(_importances_section(ctx))
    parts.append(_plots_section(drawn, skipped))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _trust_section(ctx: Context) -> str:
    """Which epochs the pruner was allowed to judge, and why (search/trust.py)."""
    from hpsearch.study.trust import rows

    found = rows(ctx.study)
    if found is None:
        return ""
    body = [
        [str(r.step), "-" if r.corr is None else f"{r.corr:.2f}", str(r.curves), "pruning" if r.trusted else "not pruning"] for r in found
    ]
    note = (
        "<p id='trust'>A trial is pruned at an epoch only once the completed trials' values there rank them as their final "
        "values do (rank correlation at least the spec's <code>pruner.trust</code>).</p>"
    )
    return "<h2>Pruning trust</h2>" + note + _table(["epoch", "rank corr", "curves", "now"], body)


def _table(header: list[str] | None, rows: list[list[str]]) -> str:
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def _summary_table(ctx: Context) -> str:
    counts: dict[str, int] = {}
    for t in ctx.trials:
        state = "IMPORTED" if "imported_from" in t.user_attrs else t.state.name  # warm_start.study: completed elsewhere
        counts[state] = counts.get(state, 0) + 1
    directions = ", ".join(f"{html.escape(m)}: {d.name.lower()}" for m, d in zip(ctx.metric_names, ctx.study.directions, strict=True))
    rows = [["study", html.escape(ctx.study.study_name)], ["directions", directions], ["trials", str(len(ctx.trials))]]
    rows += [[state.lower(), str(n)] for state, n in sorted(counts.items())]
    return _table(None, rows)


def _best_section(ctx: Context) -> str:
    from hpsearch.study.counts import own_best

    best = own_best(ctx.study)  # imported trials (warm_start.study) ran in another setting: not this study's results
    title = f"Pareto front: {len(best)} trial(s)" if ctx.multi else "Best trial"
    rows = [[str(t.number), *(_fmt(v) for v in t.values), _params(t)] for t in best]
    header = ["trial", *map(html.escape, ctx.metric_names), "params"]
    return f"<h2>{title}</h2>" + _table(header, rows)


def _top_trials(ctx: Context) -> list[FrozenTrial]:
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


def _top_trials_table(ctx: Context) -> str:
    trials = _top_trials(ctx)
    if not trials:
        return "<h2>Top trials</h2><p>No completed or pruned trials with values.</p>"
    header = ["trial", "state", "reason", *map(html.escape, ctx.metric_names), "epochs", "wall time", "params"]
    rows = [_trial_row(ctx, t) for t in trials]
    return f"<h2>Top {len(trials)} trials</h2>" + _table(header, rows)


def _trial_row(ctx: Context, t: FrozenTrial) -> list[str]:
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


def _importances_section(ctx: Context) -> str:
    """One column per set of trials (all, then each option), one row per parameter."""
    parts = ["<h2>Parameter importances (fANOVA)</h2>"]
    if ctx.flat.merged:
        merged = "; ".join(
            f"<b>{html.escape(name)}</b> = {' | '.join(map(html.escape, m.paths))}" + (" (log scale)" if m.log else "")
            for name, m in ctx.flat.merged.items()
        )
        parts.append(f"<p id='merged'>Merged across options: {merged}</p>")
        parts.append(_dashboard_note(ctx))
    if ctx.importances:
        header = ["parameter"] + [f"{html.escape(g.trials)} · {html.escape(g.metric)} ({g.completed} trials)" for g in ctx.importances]
        rows = [[html.escape(p)] + [_fmt(g.scores.get(p), ".3f") for g in ctx.importances] for p in importance_rows(ctx.importances)]
        parts.append(_table(header, rows).replace("<table>", "<table id='importances'>", 1))
    if ctx.importance_skips:
        items = "".join(f"<li>{html.escape(label)}: {html.escape(reason)}</li>" for label, reason in ctx.importance_skips)
        parts.append(f"<p>Not computed:</p><ul>{items}</ul>")
    parts.append("<p><a href='importances.json'>importances.json</a></p>")
    return "\n".join(parts)


def _plots_section(drawn: list[Drawn], skipped: list[tuple[str, str]]) -> str:
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


def _dashboard_note(ctx: Context) -> str:
    """Why optuna-dashboard's importances differ: it reads the stored parameters, where a merged
    one is several parameters each sampled in only some trials (optuna_dashboard/_importance.py)."""
    paths = ", ".join(html.escape(p) for m in ctx.flat.merged.values() for p in m.paths)
    names = ", ".join(html.escape(n) for n in ctx.flat.merged)
    return (
        "<p id='dashboard-differs'>optuna-dashboard's importances differ from these: it ranks the stored "
        "parameters that every completed trial has (with PED-ANOVA, not fANOVA), so it leaves out "
        f"{paths}, each sampled under one option only, and has no {names} to rank.</p>"
    )
