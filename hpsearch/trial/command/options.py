"""What ``objective: {command: ...}`` says: the command, its working folder, how metrics are read.

The loader turns the mapping into one entry string (``command:{json}``, with the spec's folder
as the working folder) so that every layer above stores, exports and ships it like
``module:function``. See docs/your-code.md for the user's side.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "command:"  # an objective entry that starts so is a command (what the loader makes of {command: ...})

FINAL_KEY = "_final"  # True in the config under `hpsearch train` (the final run), absent in search trials

FORMATS = ("auto", "json", "kv", "tensorboard")

KV_PATTERN = r"(?P<name>[A-Za-z_][\w/.\-]*)\s*[=:]\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)\b"

KEYS = {"command", "metrics", "pattern", "grace_s"}


@dataclass(frozen=True)
class Command:
    argv: list[str]
    cwd: str  # absolute: the spec's folder; relative paths in argv are relative to it
    metrics: str = "auto"  # auto (JSON lines, else name=value) | json | kv | tensorboard
    pattern: str = KV_PATTERN  # regex with groups name and value, for kv/auto
    grace_s: float = 10.0  # seconds between SIGTERM and SIGKILL when a trial is pruned
    env: dict[str, str] = field(default_factory=dict)


def parse_mapping(value: Any, base_dir: Path) -> tuple[str | None, list[str]]:
    """The spec's ``objective: {command: ...}`` as an entry string, or problems (``key: reason``)."""
    if not isinstance(value, dict):
        return None, ["objective: must be 'module:function', 'file.py:function' or {command: ...}"]
    problems = [f"objective.{k}: unknown key (known: {', '.join(sorted(KEYS))})" for k in value if k not in KEYS]
    raw = value.get("command")
    argv: list[str] = []
    if isinstance(raw, str):
        try:
            argv = shlex.split(raw)
        except ValueError as exc:
            problems.append(f"objective.command: cannot split {raw!r}: {exc}")
    elif isinstance(raw, list) and all(isinstance(a, str | int | float) for a in raw):
        argv = [str(a) for a in raw]
    else:
        problems.append("objective.command: must be a string or a list of strings, e.g. 'python train.py --epochs 10'")
    if not argv and not problems:
        problems.append("objective.command: is empty")
    fmt = value.get("metrics", "auto")
    if fmt not in FORMATS:
        problems.append(f"objective.metrics: must be one of {', '.join(FORMATS)}, got {fmt!r}")
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
    if problems:
        return None, problems
    command = Command(argv, str(base_dir.resolve()), str(fmt), str(pattern), float(grace))
    defaults = Command([], "")
    short = {k: v for k, v in asdict(command).items() if k in ("argv", "cwd") or v != getattr(defaults, k)}
    return PREFIX + json.dumps(short), []  # only what differs from the defaults: stored per study, shown by validate


def from_entry(entry: str) -> Command:
    data = json.loads(entry[len(PREFIX) :])
    return Command(**data)


def describe(entry: str) -> str:
    """The command as a user would type it (progress lines, describe)."""
    if not entry.startswith(PREFIX):
        return entry
    command = from_entry(entry)
    return f"{shlex.join(command.argv)} (in {command.cwd})"
