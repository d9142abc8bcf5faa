"""Read a finished (or running) study: best trials and the trials table, as text, JSON or CSV.

Everything here reads the storage a backend wrote; nothing here writes to it."""

from __future__ import annotations

import csv
import io
import sys
from typing import TYPE_CHECKING, Any

from hpsearch.base.errors import UserError
from hpsearch.base.text import fmt
from hpsearch.spec.loader import Spec
from hpsearch.study.storage import open_storage, redact

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from hpsearch.search.incumbent import Estimate
    from hpsearch.search.space import Space


def load_study(spec: Spec) -> optuna.Study:
    """The spec's study, opened read-only (a study file the user may not write still reads);
    a one-line error when there is none yet."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(spec.storage_url, read_only=True)
    names = optuna.get_all_study_names(storage)
    if spec.study not in names:
        found = ", ".join(names) or "none"
        raise UserError(f"storage {redact(spec.storage_url)}: no study named {spec.study!r} (found: {found}; has it been run?)")
    return optuna.load_study(study_name=spec.study, storage=storage)


def metric_names(study: optuna.Study, spec: Spec) -> list[str]:
    names = study.user_attrs.get("metric_names") or spec.metrics
    return list(names)[: len(study.directions)]


def directions(study: optuna.Study) -> list[str]:
    return [d.name.lower() for d in study.directions]


def completed(study: optuna.Study) -> list[FrozenTrial]:
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def ranked(study: optuna.Study) -> list[FrozenTrial]:
    """Completed trials, best first by the first metric (the study's own ranking)."""
    sign = -1.0 if directions(study)[0] == "maximize" else 1.0
    return sorted(completed(study), key=lambda t: (sign * t.values[0], t.number))


def best_trials(study: optuna.Study, tree: Space | None = None) -> list[FrozenTrial]:
    """The best trial, or the Pareto-optimal trials of a multi-objective study, among the study's
    own trials (not those imported by warm_start.study: they ran in another setting). With the
    space's ``tree`` and one metric: the noise-aware best (``estimate``), not the luckiest draw."""
    from hpsearch.study.counts import own_best

    best = own_best(study)
    if not best:
        raise UserError(f"study {study.study_name!r}: no completed trials yet")
    picked = estimate(study, tree)
    return [picked.trial] if picked is not None else best


def estimate(study: optuna.Study, tree: Space | None) -> Estimate | None:
    """The completed own trial with the best model estimate among the best observed (search/incumbent.py);
    None with several metrics or without the tree."""
    from hpsearch.search.incumbent import best
    from hpsearch.study.counts import IMPORTED_FROM

    if tree is None or len(study.directions) > 1:
        return None
    own = [t for t in completed(study) if IMPORTED_FROM not in t.user_attrs]
    return best(own, tree, maximize=directions(study)[0] == "maximize")


def short_name(path: str) -> str:
    """Conditional parameters are stored by path (optimizer.sgd.momentum); the config key is the last part."""
    return path.rsplit(".", 1)[-1]


def wall_s(trial: FrozenTrial) -> float | None:
    if "wall_s" in trial.user_attrs:
        stored: float = trial.user_attrs["wall_s"]
        return stored
    if trial.datetime_start and trial.datetime_complete:
        return (trial.datetime_complete - trial.datetime_start).total_seconds()
    return None


def trial_record(trial: FrozenTrial, names: list[str]) -> dict[str, Any]:
    """What ``best --json`` and ``trials --json`` print per trial."""
    values = dict(zip(names, trial.values, strict=False)) if trial.values is not None else None
    last = max(trial.intermediate_values.items()) if trial.intermediate_values else None
    attrs = trial.user_attrs
    return {
        "number": trial.number,
        "state": trial.state.name,
        "reason": attrs.get("reason", trial.state.name.lower()),
        "values": values,
        "last_reported": {"epoch": last[0], names[0]: last[1]} if last else None,
        "params": {short_name(k): v for k, v in trial.params.items()},
        "config": attrs.get("config"),
        "epochs": attrs.get("epochs", len(trial.intermediate_values)),
        "wall_s": wall_s(trial),
        "samples_per_s": attrs.get("samples_per_s"),
        "peak_mem_mb": attrs.get("peak_mem_mb"),
        "metrics": attrs.get("metrics"),
        "imported_from": attrs.get("imported_from"),  # warm_start.study: {study, trial}; None for the study's own trials
    }


def best_json(study: optuna.Study, spec: Spec) -> dict[str, Any]:
    names = metric_names(study, spec)
    doc = {
        "study": study.study_name,
        "metrics": names,
        "directions": directions(study),
        "pareto": len(names) > 1,
        "best": [trial_record(t, names) for t in best_trials(study, spec.tree)],
    }
    picked = estimate(study, spec.tree)
    if picked is not None:
        observed = best_trials(study)[0]
        doc["estimate"] = {names[0]: picked.value, "raw": picked.raw, "best_observed": {"trial": observed.number, names[0]: observed.value}}
    return doc


def best_text(study: optuna.Study, spec: Spec) -> str:
    doc = best_json(study, spec)
    names = doc["metrics"]
    lines = []
    if doc["pareto"]:
        goals = ", ".join(f"{m} {d}" for m, d in zip(names, doc["directions"], strict=False))
        lines.append(f"{doc['study']}: {len(doc['best'])} Pareto-optimal trials ({goals})")
    for rec in doc["best"]:
        shown = ", ".join(f"{m}={fmt(v)}" for m, v in rec["values"].items())
        head = f"{doc['study']}: best {shown}" if not doc["pareto"] else f"  trial {rec['number']}: {shown}"
        lines.append(f"{head} (trial {rec['number']}, {rec['epochs']} epochs, {fmt(rec['wall_s'])} s)")
        if "estimate" in doc:
            lines.append("    " + estimate_text(doc, rec["number"]))
        lines.append("    " + (", ".join(f"{k}={fmt(v)}" for k, v in rec["params"].items()) or "(no parameters)"))
    lines.append(f"export: hpsearch export {spec.path or 'SPEC'} -o best.yaml" + ("" if not doc["pareto"] else " --trial N"))
    return "\n".join(lines)


def estimate_text(doc: dict[str, Any], number: int) -> str:
    name, guess = doc["metrics"][0], doc["estimate"]
    seen = guess["best_observed"]
    why = (
        "also the best observed"
        if seen["trial"] == number
        else f"the best observed was trial {seen['trial']} at {fmt(seen[name])}, a luckier draw by the model"
    )
    return f"model estimate {name}={fmt(guess[name])} (noise-aware: picked among the best observed; {why})"


def ordered_trials(study: optuna.Study, sort: str = "number") -> list[FrozenTrial]:
    """By trial number, or (sort="value") completed trials best first, then the rest by number."""
    trials = study.get_trials(deepcopy=False)
    if sort == "value":
        order = {t.number: i for i, t in enumerate(ranked(study))}
        trials = sorted(trials, key=lambda t: (order.get(t.number, len(order)), t.number))
    return trials


def trial_rows(study: optuna.Study, spec: Spec, sort: str = "number") -> tuple[list[str], list[list[Any]]]:
    """Header and rows: number, state, reason, metric value(s), parameters, epochs, wall s, samples/s."""
    names = metric_names(study, spec)
    trials = ordered_trials(study, sort)
    params: list[str] = []
    for t in trials:
        params += [short_name(k) for k in t.params if short_name(k) not in params]
    header = ["number", "state", "reason", *names, *params, "epochs", "wall_s", "samples_per_s"]
    rows = []
    for t in trials:
        rec = trial_record(t, names)
        values = [rec["values"][m] if rec["values"] else None for m in names]
        rows.append(
            [
                t.number,
                rec["state"],
                " ".join(str(rec["reason"]).split()),
                *values,
                *(rec["params"].get(p) for p in params),
                rec["epochs"],
                rec["wall_s"],
                rec["samples_per_s"],
            ]
        )
    return header, rows


def trials_json(study: optuna.Study, spec: Spec, sort: str = "number") -> list[dict[str, Any]]:
    names = metric_names(study, spec)
    return [trial_record(t, names) for t in ordered_trials(study, sort)]


def trials_csv(header: list[str], rows: list[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return out.getvalue()


def plain_table(header: list[str], rows: list[list[Any]]) -> str:
    """Aligned columns for pipes and logs; numbers right-aligned."""
    cells = [header] + [[fmt(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) for i in range(len(header))]
    lines = []
    for r in cells:
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric, strict=False)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def print_table(header: list[str], rows: list[list[Any]], title: str | None = None, stream: Any = None) -> None:
    """A rich Table on a terminal, plain aligned text otherwise."""
    stream = stream or sys.stdout
    if not stream.isatty():
        if title:
            print(title, file=stream)
        print(plain_table(header, rows), file=stream)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for i, name in enumerate(header):
        numeric = all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
        table.add_column(name, justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*(fmt(v) for v in row))
    Console(file=stream).print(table)


def get_trial(study: optuna.Study, number: int | None, tree: Space | None = None) -> FrozenTrial:
    from optuna.trial import TrialState

    if number is None:
        trials = best_trials(study, tree)
        if len(trials) > 1:
            shown = ", ".join(str(t.number) for t in trials)
            raise UserError(f"study {study.study_name!r} has {len(trials)} Pareto-optimal trials ({shown}); choose one with --trial N")
        return trials[0]
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    if number not in by_number:
        have = f"trials are 0..{max(by_number)}" if by_number else "it has no trials"
        raise UserError(f"study {study.study_name!r}: no trial {number} ({have})")
    trial = by_number[number]
    if trial.state not in (TrialState.COMPLETE, TrialState.PRUNED):
        reason = trial.user_attrs.get("reason", trial.state.name.lower())
        raise UserError(f"trial {number} is {trial.state.name} ({reason}); only completed or pruned trials can be exported")
    if "config" not in trial.user_attrs:
        raise UserError(f"trial {number} has no stored config (user_attr 'config'); was it run by hpsearch?")
    return trial
