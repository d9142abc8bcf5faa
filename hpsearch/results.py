"""Read a finished (or running) study: best trials, the trials table, export, promote.

Everything here reads the storage that a backend wrote, through the trial conventions of
``hpsearch.backends.optuna`` (user_attrs "config", "reason", "epochs", "wall_s", ...), so it
works whichever backend ran the study.

``export`` writes a self-contained training config: the objective entry point, the trial's
full config (fixed values and sampled parameters), the metric names and directions, and
where it came from. ``hpsearch train`` runs it; ``promote`` re-runs the top configs with
several seeds and exports the one with the best mean.
"""

from __future__ import annotations

import csv
import datetime
import importlib.metadata
import io
import json
import math
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpsearch.checkpoints import checkpoint_of
from hpsearch.errors import UserError
from hpsearch.objective import BUILTIN, load_objective
from hpsearch.spec import Spec, apply_overrides
from hpsearch.storage import open_storage, redact
from hpsearch.text import did_you_mean, fmt

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from hpsearch.reruns import Run

PROMOTE_SUFFIX = "-promote"  # promotion runs go into the study "<study>-promote", same storage
# What an exported config turns on for the full run, per objective (keys that do not change the
# validation metric): keep the weights, and score the test split once at the end.
FULL_RUN = {BUILTIN: {"save_model": True, "evaluate_test": True}}


# ---------------------------------------------------------------------------- the study


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


def best_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The best trial, or the Pareto-optimal trials of a multi-objective study, among the study's
    own trials (not those imported by warm_start.study: they ran in another setting)."""
    from hpsearch.study import own_best

    best = own_best(study)
    if not best:
        raise UserError(f"study {study.study_name!r}: no completed trials yet")
    return best


# ---------------------------------------------------------------------------- one trial as a record


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


# ---------------------------------------------------------------------------- best


def best_json(study: optuna.Study, spec: Spec) -> dict[str, Any]:
    names = metric_names(study, spec)
    return {
        "study": study.study_name,
        "metrics": names,
        "directions": directions(study),
        "pareto": len(names) > 1,
        "best": [trial_record(t, names) for t in best_trials(study)],
    }


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
        lines.append("    " + (", ".join(f"{k}={fmt(v)}" for k, v in rec["params"].items()) or "(no parameters)"))
    lines.append(f"export: hpsearch export {spec.path or 'SPEC'} -o best.yaml" + ("" if not doc["pareto"] else " --trial N"))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- trials table


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


# ---------------------------------------------------------------------------- export


def split_overrides(items: list[str]) -> tuple[list[str], list[str]]:
    """``--set`` items whose first key is a spec key go to the spec; the rest override the trial config."""
    spec_keys = set(Spec.model_fields)
    to_spec = [i for i in items if i.partition("=")[0].strip().split(".")[0] in spec_keys]
    return to_spec, [i for i in items if i not in to_spec]


def apply_config_overrides(config: dict[str, Any], items: list[str], where: str, warn: bool = True) -> dict[str, Any]:
    """``epochs=50``: values are parsed as YAML. A key the config lacks is added, with a warning."""
    config = json.loads(json.dumps(config))  # a deep copy; configs are JSON by construction
    for item in items:
        key = item.partition("=")[0].strip().split(".")[0]
        if warn and key not in config:
            hint = did_you_mean(key, sorted(config))
            print(f"warning: --set {key}: not a key of the trial's config, added{hint}", file=sys.stderr)
    return apply_overrides(config, items, where)


def get_trial(study: optuna.Study, number: int | None) -> FrozenTrial:
    from optuna.trial import TrialState

    if number is None:
        trials = best_trials(study)
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


def portable_objective(entry: str, spec: Spec) -> str:
    """A ``file.py:fn`` entry relative to the spec becomes absolute, so the export works from anywhere."""
    module, _, fn = entry.rpartition(":")
    if not module.endswith(".py") or Path(module).is_absolute():
        return entry
    return f"{(spec.base_dir / module).resolve()}:{fn}"


def versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for package in ("hpsearch", "torch", "optuna"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


def git_commit(where: Path) -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def provenance(study_name: str, trial: FrozenTrial, names: list[str], storage_url: str, spec_path: str = "") -> dict[str, Any]:
    """Where an exported config came from; the storage URL never carries a password."""
    where = Path(spec_path).parent if spec_path else Path.cwd()
    rec = trial_record(trial, names)
    return {
        "study": study_name,
        "trial": trial.number,
        "state": trial.state.name.lower(),
        "reason": rec["reason"],
        "values": rec["values"],
        "epochs": rec["epochs"],
        "storage": redact(storage_url),
        "spec": spec_path or None,
        "versions": versions(),
        "git_commit": git_commit(where.resolve() if where.exists() else Path.cwd()),
        "exported": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    } | ({"last_reported": rec["last_reported"]} if rec["values"] is None and rec["last_reported"] else {})


def export_doc(
    study: optuna.Study, spec: Spec, number: int | None = None, config_overrides: list[str] | None = None, warn: bool = True
) -> dict[str, Any]:
    """The exported training config as a dict (see ``write_export`` for the file)."""
    trial = get_trial(study, number)
    names = metric_names(study, spec)
    entry = study.user_attrs.get("objective") or spec.objective
    config = {**trial.user_attrs["config"], **FULL_RUN.get(entry, {})}
    config = apply_config_overrides(config, config_overrides or [], f"trial {trial.number} config", warn)
    objective = portable_objective(entry, spec)
    source = provenance(study.study_name, trial, names, spec.storage_url, spec.path)
    if FULL_RUN.get(entry):
        source["full_run"] = FULL_RUN[entry]
    if config_overrides:
        source["overrides"] = list(config_overrides)
    checkpoint = checkpoint_of(spec.study_dir, trial.number)
    if checkpoint.exists():  # the best trial's last checkpoint is kept: its trained weights, to inspect or fine-tune
        source["checkpoint"] = str(checkpoint.resolve())
    doc = {
        "objective": objective,
        "metric": names,
        "direction": directions(study),
        "output": str(spec.study_dir.parent),  # absolute here; write_export makes it relative to the file
        "config": config,
        "provenance": source,
    }
    check_config(doc, "export")
    return doc


def check_config(doc: dict[str, Any], where: str, base_dir: Path | None = None) -> None:
    """The objective must import and its ``validate`` hook accept the config; one line per problem."""
    try:
        fn = load_objective(doc["objective"], base_dir)
    except ValueError as exc:
        raise UserError(f"{where}: objective: {exc}") from None
    validate = getattr(fn, "validate", None)
    problems = (validate(dict(doc["config"])) or []) if validate is not None else []
    if problems:
        raise UserError([f"{where}: config: {p}" for p in problems])


def default_run_dir(doc: dict[str, Any]) -> Path:
    """Where ``hpsearch train`` writes without -o: <output>/train/<study>-trial<N>/ (-promoted for
    a promoted config, so training it after best.yaml of the same trial does not meet that run)."""
    src = doc.get("provenance") or {}
    name = f"{src['study']}-trial{src['trial']}" if "study" in src and "trial" in src else "run"
    if "promotion" in src:
        name += "-promoted"
    return Path(doc.get("output") or "runs") / "train" / name


def shown(path: Path | str) -> str:
    """A path as a user types it here: relative to the current folder when under it, else absolute."""
    rel = os.path.relpath(os.path.abspath(path))
    return os.path.abspath(path) if rel.startswith("..") else rel


def header(doc: dict[str, Any], path: Path) -> str:
    src = doc.get("provenance") or {}
    values = src.get("values") or {}
    values_text = ", ".join(f"{m}={fmt(v)}" for m, v in values.items()) or src.get("reason") or ""
    run_dir = default_run_dir(doc)
    builtin = bool(src.get("full_run"))  # the built-in objective checkpoints and saves weights; others may not
    does = (
        "checkpoints each epoch\n# (run it again to resume), and writes metrics.json, TensorBoard logs and the weights.\n"
        if builtin
        else "resumes from a checkpoint\n# when the objective saves one (reporter.save_checkpoint), and writes metrics.json and TensorBoard logs.\n"
    )
    return (
        f"# Training config exported by hpsearch: study {src.get('study')}, trial {src.get('trial')} ({values_text}).\n"
        f"# Run it:   hpsearch train {path}              # writes {shown(run_dir)}/\n"
        f"#           hpsearch train {path} -o DIR --set epochs=50\n"
        f"# train calls the objective below with `config`, never prunes, {does}"
        + (f"# Set for the full run: {', '.join(f'{k}: {fmt(v)}' for k, v in src['full_run'].items())}.\n" if builtin else "")
    )


def write_export(doc: dict[str, Any], path: Path) -> Path:
    """The file ``hpsearch train`` reads; a relative ``output:`` in it is relative to the file's folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = header(doc, path)
    if doc.get("output") and os.path.isabs(doc["output"]):
        doc = {**doc, "output": os.path.relpath(doc["output"], os.path.abspath(path.parent))}
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)
    path.write_text(head + body, encoding="utf-8")
    return path


def export(spec: Spec, out: Path, number: int | None = None, config_overrides: list[str] | None = None) -> dict[str, Any]:
    doc = export_doc(load_study(spec), spec, number, config_overrides)
    write_export(doc, out)
    return doc


# ---------------------------------------------------------------------------- promote


@dataclass
class Candidate:
    """One top config re-run with several seeds: the first metric per finished run, in ``seeds`` order."""

    trial: FrozenTrial
    config: dict[str, Any]
    seeds: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def std(self) -> float:
        """Sample standard deviation (n-1); 0 for a single run."""
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0


def top_configs(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The k best completed trials by the first metric, one per distinct config (the study's own:
    an imported trial's config ran in another setting)."""
    picked: list[FrozenTrial] = []
    seen: list[Any] = []
    for trial in ranked(study):
        config = trial.user_attrs.get("config")
        if config is None or config in seen or "imported_from" in trial.user_attrs:
            continue
        seen.append(config)
        picked.append(trial)
        if len(picked) == k:
            break
    return picked


def pick(candidates: list[Candidate], direction: str) -> Candidate:
    """Best mean; ties go to the lower spread, then to the better-ranked trial."""
    scored = [c for c in candidates if c.values]
    if not scored:
        raise UserError("promote: every re-run failed; " + (candidates[0].failures[0] if candidates and candidates[0].failures else ""))
    sign = -1.0 if direction == "maximize" else 1.0
    return min(scored, key=lambda c: (sign * c.mean, c.std))


def promote_table(candidates: list[Candidate], metric: str, winner: Candidate | None) -> tuple[list[str], list[list[Any]]]:
    params: list[str] = []
    for c in candidates:
        params += [short_name(k) for k in c.trial.params if short_name(k) not in params]
    head = ["trial", f"search {metric}", f"mean {metric}", "± std", "runs", *params, "per seed"]
    rows = []
    for c in candidates:
        mark = " *" if c is winner else ""
        shown = {short_name(k): v for k, v in c.trial.params.items()}
        per_seed = " ".join(f"{fmt(v)}" for v in c.values) + (f" ({len(c.failures)} failed)" if c.failures else "")
        rows.append(
            [
                f"{c.trial.number}{mark}",
                c.trial.values[0],
                c.mean if c.values else None,
                c.std if c.values else None,
                len(c.values),
                *(shown.get(p) for p in params),
                per_seed,
            ]
        )
    return head, rows


def promote_study(spec: Spec, study: optuna.Study) -> optuna.Study:
    """The study "<study>-promote" beside the searched one: every re-run is a trial the dashboard shows."""
    from hpsearch.reruns import derived_study

    return derived_study(spec, study, PROMOTE_SUFFIX, "promote")


def join_hint(spec: Spec, rstudy: optuna.Study) -> str:
    """How another machine joins a re-run study (a default sqlite storage moves with the study name, so it is named)."""
    return (
        f"other machines join with: hpsearch worker {spec.path or 'SPEC'} --study {rstudy.study_name} --storage {redact(spec.storage_url)}"
    )


def run_fixed(spec: Spec, rstudy: optuna.Study, runs: list[Run], quiet: bool, stream: Any, queue_only: bool = False) -> str | None:
    """Queue the runs that have not finished and run them with the engine's claim loop (``--workers``
    slots here; ``hpsearch worker`` processes elsewhere may join). Why the engine stopped early, if it did."""
    from hpsearch.backends.optuna import run
    from hpsearch.reruns import drop_others, finished, planned, queue, rerun_spec

    missing = [r for r in runs if finished(rstudy, r) is None]
    drop_others(rstudy, missing)
    if not missing:
        return None
    added = queue(rstudy, missing)
    print(f"{rstudy.study_name}: {len(missing)} runs to go ({added} newly queued); {join_hint(spec, rstudy)}", file=stream, flush=True)
    if spec.backend != "optuna":
        print(f"backend {spec.backend}: re-runs of fixed configs go through the embedded engine's slots (no scheduler needed)", file=stream)
    if queue_only:
        return None
    summary = run(rerun_spec(spec, rstudy.study_name, planned(rstudy)), quiet=quiet)
    return summary.stopped_early


def run_outcome(rstudy: optuna.Study, run: Run, metric: str, earlier: bool) -> tuple[float | None, str]:
    """(first metric, how it went) of one re-run after the engine ran: finished, failed, or not run."""
    from hpsearch.reruns import finished, last_failure

    done = finished(rstudy, run)
    if done is not None:
        kind = (rstudy.user_attrs.get("reruns") or {}).get("kind", "promote")
        how = f"from an earlier {kind} run" if earlier else f"{fmt(wall_s(done))} s"
        return done.values[0], how
    failed = last_failure(rstudy, run)
    return None, str(failed.user_attrs.get("reason", "failed")) if failed is not None else "not run (stopped early or interrupted)"


@dataclass
class Promotion:
    candidates: list[Candidate]
    winner: Candidate
    out: Path  # the exported config of the winner
    metric: str  # the metric the candidates are ranked by (the study's first)


def promote(
    spec: Spec,
    k: int,
    seeds: int,
    seed_base: int = 0,
    config_overrides: list[str] | None = None,
    out: Path | None = None,
    quiet: bool = False,
    stream: Any = None,
    queue_only: bool = False,
) -> Promotion | None:
    """Re-run the top ``k`` configs with ``seeds`` seeds each (config "seed" = seed_base + i) as queued
    trials of the study "<study>-promote", run by the engine (``spec.resources.workers`` slots, and any
    ``hpsearch worker`` that joins); export the config with the best mean to ``out``.
    ``queue_only``: queue the runs for workers and return None."""
    from hpsearch.reruns import Run, finished

    stream = stream or sys.stdout
    study = load_study(spec)
    names = metric_names(study, spec)
    top = top_configs(study, k)
    if not top:
        raise UserError(f"study {study.study_name!r}: no completed trials yet")
    overrides = list(config_overrides or [])
    candidates = [
        Candidate(t, apply_config_overrides(t.user_attrs["config"], overrides, "promote", warn=i == 0)) for i, t in enumerate(top)
    ]
    entry = portable_objective(study.user_attrs.get("objective") or spec.objective, spec)
    for c in candidates:
        check_config({"objective": entry, "config": c.config}, f"promote: trial {c.trial.number}")
    pstudy = promote_study(spec, study)
    numbers = ", ".join(str(c.trial.number) for c in candidates)
    print(
        f"{study.study_name}: promoting the top {len(candidates)} configs by {names[0]} ({numbers}), {seeds} seeds each "
        f"({seed_base}..{seed_base + seeds - 1}); runs go to study {pstudy.study_name!r}",
        file=stream,
        flush=True,
    )
    runs = [(c, Run(c.trial, seed, {**c.config, "seed": seed})) for c in candidates for seed in range(seed_base, seed_base + seeds)]
    earlier = {id(r) for _, r in runs if finished(pstudy, r) is not None}
    for c, r in runs:
        if id(r) in earlier:
            print(f"trial {c.trial.number} seed {r.seed}: {run_line(pstudy, r, names[0], True)}", file=stream, flush=True)
    stopped = run_fixed(spec, pstudy, [r for _, r in runs], quiet, stream, queue_only)
    if queue_only:
        return None
    for c, r in runs:
        value, how = run_outcome(pstudy, r, names[0], id(r) in earlier)
        if value is None:
            c.failures.append(f"seed {r.seed}: {how}")
        else:
            c.seeds.append(int(r.seed or 0))
            c.values.append(value)
        if id(r) not in earlier:
            print(f"trial {c.trial.number} seed {r.seed}: {run_line(pstudy, r, names[0], False)}", file=stream, flush=True)
    if stopped:
        print(f"re-runs stopped early: {stopped}", file=stream, flush=True)
    winner = pick(candidates, directions(study)[0])
    out = out or spec.study_dir / "promoted.yaml"
    doc = export_doc(study, spec, winner.trial.number, overrides, warn=False)
    doc["provenance"]["promotion"] = {
        "metric": names[0],
        "seeds": winner.seeds,
        "values": winner.values,
        "mean": winner.mean,
        "std": winner.std,
        "runs_study": pstudy.study_name,
        "candidates": [
            {
                "trial": c.trial.number,
                "mean": c.mean if c.values else None,
                "std": c.std if c.values else None,
                "runs": len(c.values),
                "failed": len(c.failures),
            }
            for c in candidates
        ],
    }
    write_export(doc, out)
    return Promotion(candidates, winner, out, names[0])


def run_line(rstudy: optuna.Study, run: Run, metric: str, earlier: bool) -> str:
    value, how = run_outcome(rstudy, run, metric, earlier)
    return how if value is None else f"{metric}={fmt(value)} ({how})"
