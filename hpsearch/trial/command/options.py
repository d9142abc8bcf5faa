"""What ``objective: {command: ...}`` says: the command, its flag style, where it runs, how metrics are read.

The loader turns the mapping into one entry string (``command:{json}``, with the spec's folder
as the working folder) so that every layer above stores, exports and ships it like
``module:function``. Only what differs from the defaults is stored, so a spec written before a
setting existed keeps its entry. See docs/your-code.md for the user's side.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpsearch.base.text import did_you_mean
from hpsearch.trial.command.style import FlagStyle, parse_flags

PREFIX = "command:"  # an objective entry that starts so is a command (what the loader makes of {command: ...})

FINAL_KEY = "_final"  # True in the config under `hpsearch train` (the final run), absent in search trials

FORMATS = ("auto", "json", "kv", "tensorboard", "csv", "jsonl")
LOG_FORMATS = ("tensorboard", "csv", "jsonl")  # read from files the script writes (logs.py)
WORKDIRS = ("spec", "trial")

KV_PATTERN = r"(?P<name>[A-Za-z_][\w/.\-]*)\s*[=:]\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)\b"

KEYS = ("command", "flags", "metrics", "logs", "pattern", "workdir", "grace_s", "config_file")

WORK = "work"  # `workdir: trial`: the script runs in <trial folder>/work


@dataclass(frozen=True)
class Command:
    argv: list[str]
    cwd: str  # absolute: the spec's folder; relative paths in argv are relative to it
    metrics: str = "auto"  # auto | json | kv | tensorboard | csv | jsonl | regex (a regex per metric: ``regexes``)
    pattern: str = KV_PATTERN  # regex with groups name and value, for kv (and auto, when set)
    grace_s: float = 10.0  # seconds between SIGTERM and SIGKILL when a trial is pruned
    env: dict[str, str] = field(default_factory=dict)
    flags: FlagStyle = field(default_factory=FlagStyle)
    logs: str | None = None  # tensorboard/csv/jsonl: a path or glob relative to the working folder
    workdir: str = "spec"  # spec: the spec's folder | trial: <trial folder>/work, one per trial
    regexes: dict[str, str] = field(default_factory=dict)
    config_file: str | None = None  # absolute: the base file a trial's values are written into (config_file.py)

    def workdir_for(self, trial_dir: Path) -> Path:
        return trial_dir / WORK if self.workdir == "trial" else Path(self.cwd)


def _argv(raw: Any, problems: list[str]) -> list[str]:
    if isinstance(raw, str):
        try:
            return shlex.split(raw)
        except ValueError as exc:
            problems.append(f"objective.command: cannot split {raw!r}: {exc}")
    elif isinstance(raw, list) and all(isinstance(a, str | int | float) for a in raw):
        return [str(a) for a in raw]
    else:
        problems.append("objective.command: must be a string or a list of strings, e.g. 'python train.py --epochs 10'")
    return []


def _metrics(value: Any, problems: list[str]) -> tuple[str, dict[str, str]]:
    """``metrics:`` as (format, regexes): a format name, or ``{metric: regex}``."""
    if isinstance(value, dict) and value:
        regexes: dict[str, str] = {}
        for name, regex in value.items():
            where = f"objective.metrics.{name}"
            try:
                compiled = re.compile(regex) if isinstance(regex, str) else None
            except re.error as exc:
                problems.append(f"{where}: not a regular expression: {exc}")
                continue
            if compiled is None or not (compiled.groups or "value" in compiled.groupindex):
                problems.append(f"{where}: must be a regex with a group around the number, e.g. 'val loss ([\\d.]+)'")
                continue
            regexes[str(name)] = regex
        return "regex", regexes
    if value not in FORMATS:
        known = f"{', '.join(FORMATS)}, or {{metric: regex}}"
        hint = did_you_mean(value, FORMATS) if isinstance(value, str) else ""
        problems.append(f"objective.metrics: must be one of {known}, got {value!r}{hint}")
        return "auto", {}
    return str(value), {}


def _checks(value: dict[str, Any], fmt: str, problems: list[str]) -> None:
    pattern = value.get("pattern", KV_PATTERN)
    try:
        groups = re.compile(pattern).groupindex if isinstance(pattern, str) else {}
        if not {"name", "value"} <= set(groups):
            problems.append("objective.pattern: needs groups (?P<name>...) and (?P<value>...)")
    except re.error as exc:
        problems.append(f"objective.pattern: not a regular expression: {exc}")
    grace = value.get("grace_s", 10.0)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace <= 3600:
        problems.append(f"objective.grace_s: must be seconds between 0 and 3600, got {grace!r}")
    logs = value.get("logs")
    if logs is not None and (not isinstance(logs, str) or not logs.strip()):
        problems.append(f"objective.logs: must be a path or glob, e.g. 'lightning_logs/version_*/', got {logs!r}")
    elif logs is not None and fmt not in LOG_FORMATS:
        problems.append(f"objective.logs: is where metrics: tensorboard, csv or jsonl reads; metrics is {fmt}")
    elif logs is None and fmt in ("csv", "jsonl"):
        problems.append(f"objective.logs: required with metrics: {fmt}: the file or its folder, e.g. 'output/metrics.json'")
    workdir = value.get("workdir", "spec")
    if workdir not in WORKDIRS:
        problems.append(f"objective.workdir: must be spec (the spec's folder) or trial (a folder per trial), got {workdir!r}")


def parse_mapping(value: Any, base_dir: Path) -> tuple[str | None, list[str]]:
    """The spec's ``objective: {command: ...}`` as an entry string, or problems (``key: reason``)."""
    if not isinstance(value, dict):
        return None, ["objective: must be 'module:function', 'file.py:function' or {command: ...}"]
    problems = [f"objective.{k}: unknown key{did_you_mean(k, KEYS)}" for k in value if k not in KEYS]
    argv = _argv(value.get("command"), problems)
    if not argv and not problems:
        problems.append("objective.command: is empty")
    fmt, regexes = _metrics(value.get("metrics", "auto"), problems)
    style, flag_problems = parse_flags(value.get("flags"))
    problems += flag_problems
    _checks(value, fmt, problems)
    config_file = _config_file(value.get("config_file"), base_dir, problems)
    if problems:
        return None, problems
    command = Command(
        argv,
        str(base_dir.resolve()),
        fmt,
        str(value.get("pattern", KV_PATTERN)),
        float(value.get("grace_s", 10.0)),
        flags=style,
        logs=value.get("logs"),
        workdir=str(value.get("workdir", "spec")),
        regexes=regexes,
        config_file=config_file,
    )
    return to_entry(command), []


def _config_file(value: Any, base_dir: Path, problems: list[str]) -> str | None:
    """``objective.config_file``: the base file (YAML or JSON, relative to the spec's folder) that must parse now."""
    from hpsearch.trial.command.config_file import read_base

    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"objective.config_file: must be the path of a YAML or JSON file, e.g. data/hyp.yaml, got {value!r}")
        return None
    path = (base_dir / value).resolve()
    _, why = read_base(path)
    if why is not None:
        problems.append(f"objective.config_file: {why}")
    return str(path)


def to_entry(command: Command) -> str:
    """Only what differs from the defaults: stored per study, shown by validate, exported to train."""
    default = Command([], "")
    short: dict[str, Any] = {"argv": command.argv, "cwd": command.cwd}
    for name in ("metrics", "pattern", "grace_s", "env", "logs", "workdir", "regexes", "config_file"):
        if getattr(command, name) != getattr(default, name):
            short[name] = getattr(command, name)
    if command.flags.to_dict():
        short["flags"] = command.flags.to_dict()
    return PREFIX + json.dumps(short)


def from_entry(entry: str) -> Command:
    data = json.loads(entry[len(PREFIX) :])
    if "flags" in data:
        data["flags"] = FlagStyle.from_dict(data["flags"])
    return Command(**data)


def describe(entry: str) -> str:
    """The command as a user would type it (progress lines, describe)."""
    if not entry.startswith(PREFIX):
        return entry
    command = from_entry(entry)
    where = command.cwd if command.workdir == "spec" else f"each trial's folder/{WORK}"
    return f"{shlex.join(command.argv)} (in {where})"
