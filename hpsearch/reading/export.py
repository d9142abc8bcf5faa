"""``hpsearch export``: a trial's config as a file that ``hpsearch train`` runs, with its provenance; config overrides shared with ``train``."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpsearch.base.errors import UserError
from hpsearch.base.text import did_you_mean, fmt
from hpsearch.spec.loader import Spec
from hpsearch.spec.overrides import apply_overrides
from hpsearch.study.checkpoints import checkpoint_of
from hpsearch.study.storage import redact
from hpsearch.trial.objective import BUILTIN, load_objective

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

from hpsearch.reading.results import directions, get_trial, load_study, metric_names, trial_record

# What an exported config turns on for the full run, per objective (keys that do not change the
# validation metric): keep the weights, and score the test split once at the end.
FULL_RUN = {BUILTIN: {"save_model": True, "evaluate_test": True}}


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
    trial = get_trial(study, number, spec.tree)
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
