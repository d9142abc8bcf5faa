"""``hpsearch audit SPEC``: did pruning kill a winner?

Re-runs the K pruned trials that ranked best at the epoch they were pruned (their last reported
value against the completed trials' values at that same epoch) to completion, pruner off, with
S seeds, as queued runs of the study "<study>-audit" in the same storage (study/rerun_queue.py: the
engine's slots and any joining ``hpsearch worker`` run them; running audit again reuses them).

It reports how many re-runs beat or tie the study's best (a tie: within ``TIE_REL`` of it), the
false-prune rate k/n among the audited trials with a Wilson interval, and the epochs pruning
saved. The result is stored as the audit study's user attribute ``audit``; ``hpsearch report``
shows it (``report_section``).
"""

from __future__ import annotations

import html
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.base.errors import UserError
from hpsearch.base.text import fmt
from hpsearch.reading.results import load_study, metric_names, print_table
from hpsearch.reruns.fixed import run_fixed, run_outcome
from hpsearch.study.trust import line as trust_line

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from hpsearch.spec.loader import Spec

AUDIT_SUFFIX = "-audit"  # the re-runs go into the study "<study>-audit", same storage
TIE_REL = 1e-3  # a re-run within 0.1% of the best value (relative to it) ties the best
CONFIDENCE = 0.95  # of the false-prune rate's interval
RESULT = "audit"  # audit study user attribute: the latest audit's result (JSON), read by `hpsearch report`
IMPORTED = "imported_from"  # trial user attribute of a trial imported by warm_start.study: not this study's own


@dataclass
class Audited:
    """A pruned trial, where it stood when pruned, and its re-runs (the first metric per finished run)."""

    trial: FrozenTrial
    pruned_at: int  # the epoch of its last report
    value_then: float
    rank: int  # 1 + completed trials that were better at that epoch (shown "rank of of+1": among them and itself)
    of: int  # completed trials with a value at that epoch
    config: dict[str, Any]
    values: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan


def own(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    return [t for t in trials if IMPORTED not in t.user_attrs]


def sign_of(study: optuna.Study) -> float:
    """+1 when larger is better (the first metric), -1 when smaller is."""
    return 1.0 if study.directions[0].name == "MAXIMIZE" else -1.0


def ranked_pruned(study: optuna.Study) -> list[Audited]:
    """Pruned trials best first by their rank at the epoch they were pruned (share of completed trials
    better then; then by that value)."""
    from optuna.trial import TrialState

    sign = sign_of(study)
    done = own(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    pruned = own(study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)))
    found = []
    for t in pruned:
        if not t.intermediate_values or "config" not in t.user_attrs:
            continue
        step = max(t.intermediate_values)
        value = t.intermediate_values[step]
        then = [c.intermediate_values[step] for c in done if step in c.intermediate_values]
        better = sum(sign * v > sign * value for v in then)
        found.append(Audited(t, step, value, better + 1, len(then), t.user_attrs["config"]))
    return sorted(found, key=lambda a: ((a.rank - 1) / max(a.of, 1), -sign * a.value_then, a.trial.number))


def savings(study: optuna.Study) -> dict[str, int]:
    """Epochs the pruned trials did not run, against the epochs every finished trial would have run
    unpruned. A trial's planned epochs: its config's ``epochs``, else the longest completed curve."""
    from optuna.trial import TrialState

    done = own(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    pruned = own(study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)))
    longest = max((max(t.intermediate_values) for t in done if t.intermediate_values), default=0)

    def planned(t: FrozenTrial) -> int:
        epochs = (t.user_attrs.get("config") or {}).get("epochs")
        return int(epochs) if isinstance(epochs, int) and not isinstance(epochs, bool) else max(longest, ran(t))

    def ran(t: FrozenTrial) -> int:
        return int(t.user_attrs.get("epochs", len(t.intermediate_values)))

    saved = sum(max(0, planned(t) - ran(t)) for t in pruned)
    return {"pruned": len(pruned), "saved": saved, "unpruned": sum(planned(t) for t in done + pruned), "finished": len(done + pruned)}


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (0..1 when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def verdict(value: float, best: float, sign: float) -> str:
    """beats / ties / below the best (a tie: within TIE_REL of the best's magnitude); failed without a value."""
    if math.isnan(value):
        return "failed"
    if abs(value - best) <= TIE_REL * abs(best):
        return "ties"
    return "beats" if sign * (value - best) > 0 else "below"


def seeds_of(config: dict[str, Any], seeds: int) -> list[tuple[int | None, dict[str, Any]]]:
    """(seed, config) per re-run: the first is the pruned trial's own config (the run pruning stopped);
    more seeds set config "seed" to its seed + 1, + 2, ..."""
    base = config.get("seed")
    first = int(base) if isinstance(base, int) and not isinstance(base, bool) else 0
    return [(base if i == 0 else first + i, config if i == 0 else {**config, "seed": first + i}) for i in range(seeds)]


def audit(
    spec: Spec, k: int = 5, seeds: int = 1, quiet: bool = False, stream: Any = None, queue_only: bool = False
) -> dict[str, Any] | None:
    """Re-run the ``k`` best-ranked pruned trials to completion with ``seeds`` seeds; the result (also
    stored on the audit study), or None when there is nothing to audit or ``queue_only``."""
    from hpsearch.study.rerun_queue import Run, derived_study, finished

    stream = stream or sys.stdout
    study = load_study(spec)
    names = metric_names(study, spec)
    candidates = ranked_pruned(study)
    if not candidates:
        n = len(own(study.get_trials(deepcopy=False)))
        print(f"{study.study_name}: no pruned trials to audit ({n} trials); nothing to re-run", file=stream, flush=True)
        return None
    best = best_trial(study)
    chosen = candidates[:k]
    astudy = derived_study(spec, study, AUDIT_SUFFIX, "audit")
    print(
        f"{study.study_name}: auditing {len(chosen)} of {len(candidates)} pruned trials (those ranked best at the epoch they were "
        f"pruned), {seeds} seed{'s' if seeds > 1 else ''} each, pruner off; runs go to study {astudy.study_name!r}",
        file=stream,
        flush=True,
    )
    runs = [(a, Run(a.trial, seed, config)) for a in chosen for seed, config in seeds_of(a.config, seeds)]
    earlier = {id(r) for _, r in runs if finished(astudy, r) is not None}
    if earlier:
        print(f"{len(earlier)} of {len(runs)} re-runs finished in an earlier audit: reused", file=stream, flush=True)
    stopped = run_fixed(spec, astudy, [r for _, r in runs], quiet, stream, queue_only)
    if queue_only:
        return None
    for a, r in runs:
        value, how = run_outcome(astudy, r, names[0], id(r) in earlier)
        if value is None:
            a.failures.append(f"seed {r.seed}: {how}")
        else:
            a.values.append(value)
    if stopped:
        print(f"re-runs stopped early: {stopped}", file=stream, flush=True)
    doc = result(study, names[0], best, chosen, seeds, sum(id(r) in earlier for _, r in runs))
    doc["trust"] = trust_line(study)  # the gate's verdicts beside the false prunes it let through
    astudy.set_user_attr(RESULT, doc)
    return doc


def best_trial(study: optuna.Study) -> FrozenTrial:
    from optuna.trial import TrialState

    done = own(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    if not done:
        raise UserError(f"study {study.study_name!r}: no completed trials, so no best to compare pruned trials with")
    sign = sign_of(study)
    return max(done, key=lambda t: (sign * t.values[0], -t.number))


def result(study: optuna.Study, metric: str, best: FrozenTrial, chosen: list[Audited], seeds: int, reused: int) -> dict[str, Any]:
    """The audit as JSON: per audited trial, the false-prune count and interval, the epochs saved."""
    sign = sign_of(study)
    rows = [
        {
            "trial": a.trial.number,
            "pruned_at": a.pruned_at,
            "rank": a.rank,
            "of": a.of,
            "value_then": a.value_then,
            "values": a.values,
            "mean": a.mean if a.values else None,
            "failures": a.failures,
            "verdict": verdict(a.mean, best.values[0], sign),
        }
        for a in chosen
    ]
    n = sum(r["verdict"] != "failed" for r in rows)
    k = sum(r["verdict"] in ("beats", "ties") for r in rows)
    low, high = wilson(k, n)
    return {
        "study": study.study_name,
        "metric": metric,
        "direction": study.directions[0].name.lower(),
        "best": best.values[0],
        "best_trial": best.number,
        "tie_rel": TIE_REL,
        "seeds": seeds,
        "reused_runs": reused,
        "audited": rows,
        "false_prunes": k,
        "n": n,
        "rate": k / n if n else None,
        "confidence": CONFIDENCE,
        "interval": [low, high],
        "epochs": savings(study),
    }


# ---------------------------------------------------------------------------- what the user reads


def table(doc: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    m = doc["metric"]
    head = ["trial", "pruned at", "rank then", f"{m} then", f"re-run {m}", "runs", "vs best"]
    rows = [
        [r["trial"], r["pruned_at"], f"{r['rank']} of {r['of'] + 1}", r["value_then"], r["mean"], len(r["values"]), r["verdict"]]
        for r in doc["audited"]
    ]
    return head, rows


def summary_lines(doc: dict[str, Any]) -> list[str]:
    low, high = doc["interval"]
    pct = round(doc["confidence"] * 100)
    e = doc["epochs"]
    share = e["saved"] / e["unpruned"] if e["unpruned"] else 0.0
    rate = "n/a" if doc["rate"] is None else fmt(doc["rate"])
    return [
        f"{doc['study']}: {doc['false_prunes']} of {doc['n']} audited pruned trials would have beaten or tied the best "
        f"{doc['metric']}={fmt(doc['best'])} (trial {doc['best_trial']}; tie: within {doc['tie_rel']:.1%}): "
        f"false-prune rate {rate}, {pct}% CI {low:.2f}-{high:.2f} (Wilson)",
        f"pruning saved {e['saved']} of {e['unpruned']} epochs ({share:.0%}): {e['pruned']} of {e['finished']} finished trials were pruned",
        *([doc["trust"]] if doc.get("trust") else []),
    ]


def print_result(doc: dict[str, Any], stream: Any = None) -> None:
    head, rows = table(doc)
    print_table(head, rows, title=f"{doc['study']}: {len(rows)} audited pruned trials", stream=stream)
    for line in summary_lines(doc):
        print(line, file=stream or sys.stdout)


# ---------------------------------------------------------------------------- hpsearch report


def stored(study: optuna.Study) -> tuple[dict[str, Any], optuna.Study] | None:
    """The latest audit of ``study`` (from "<study>-audit" in the same storage) and that study."""
    import optuna

    from hpsearch.study.storage import storage_of

    storage = storage_of(study)
    name = study.study_name + AUDIT_SUFFIX
    if name not in {s.study_name for s in storage.get_all_studies()}:
        return None
    astudy = optuna.load_study(study_name=name, storage=storage)
    doc = astudy.user_attrs.get(RESULT)
    return (doc, astudy) if doc else None


def report_section(study: optuna.Study, out: Path) -> str:
    """The index page's audit section (and audit.png: each audited trial's curve as pruned and as re-run)."""
    found = stored(study)
    if found is None:
        return (
            "<h2>Pruning audit</h2><p id='audit'>No audit yet: <code>hpsearch audit SPEC</code> re-runs the best-ranked pruned trials.</p>"
        )
    doc, astudy = found
    head, rows = table(doc)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(c))}</td>" for c in row) + "</tr>" for row in rows)
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    lines = "".join(f"<p>{html.escape(line)}</p>" for line in summary_lines(doc))
    plot = ""
    try:
        plot_curves(study, astudy, doc, out / "audit.png")
        plot = "<p><img src='audit.png' alt='audited trials: pruned curve and re-run curve' style='width:512px'></p>"
    except Exception as e:  # a plot must not cost the section
        plot = f"<p class='note'>audit plot failed: {html.escape(str(e))}</p>"
    return f"<h2>Pruning audit</h2><div id='audit'>{lines}<table>{header}{body}</table>{plot}</div>"


def plot_curves(study: optuna.Study, astudy: optuna.Study, doc: dict[str, Any], path: Path) -> None:
    """Solid: the curve the trial had when pruned; dashed: its first re-run to the end; black: the best trial."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.trial import TrialState

    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    reruns = astudy.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    try:
        best = trials[doc["best_trial"]].intermediate_values
        ax.plot(sorted(best), [best[s] for s in sorted(best)], color="black", label=f"best (trial {doc['best_trial']})")
        for i, row in enumerate(doc["audited"]):
            colour = f"C{i % 10}"
            then = trials[row["trial"]].intermediate_values
            ax.plot(sorted(then), [then[s] for s in sorted(then)], color=colour, marker="x", label=f"trial {row['trial']}")
            again = next((t.intermediate_values for t in reruns if t.user_attrs.get("source_trial") == row["trial"]), {})
            ax.plot(sorted(again), [again[s] for s in sorted(again)], color=colour, linestyle="--")
        ax.set_xlabel("epoch")
        ax.set_ylabel(doc["metric"])
        ax.set_title("pruned (solid, x) vs re-run to the end (dashed)")
        ax.legend(fontsize="small")
        fig.savefig(path, dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
