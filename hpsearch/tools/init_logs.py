"""``hpsearch init --probe``: the log files a script wrote while it ran (YOLOv5's results.csv,
Lightning's metrics.csv or event files, detectron2's metrics.json), read as a trial would read
them, so the spec can read the metrics from there (``metrics: csv``, ``logs:``, ``workdir: trial``)."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hpsearch.trial.command.lines import STEP_KEYS
from hpsearch.trial.command.logs import GLOBS, rows_of

SKIP = {".git", ".venv", "venv", "env", "node_modules", "__pycache__", "site-packages", ".hpsearch"}
DEPTH = 6  # folders below the working folder a log may sit in
MAX_SEEN = 100_000  # files looked at: a snapshot of a huge tree (a dataset's images) stops there


@dataclass
class SeenLog:
    kind: str  # tensorboard | csv | jsonl
    path: str  # relative to the working folder
    glob: str  # what objective.logs says: digit runs in its folders as *, a run folder for TensorBoard
    rows: list[tuple[int, dict[str, float]]]
    unit: str  # where its steps come from, for messages


def kind_of(name: str) -> str | None:
    return next((kind for kind, globs in GLOBS.items() if any(fnmatch.fnmatch(name, g) for g in globs)), None)


def snapshot(root: Path) -> dict[Path, tuple[int, int]]:
    """Log-like files under ``root`` with (size, mtime): taken before the probe, and after."""
    out: dict[Path, tuple[int, int]] = {}
    base, seen = len(root.parts), 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith(".") and len(Path(folder).parts) - base < DEPTH]
        seen += len(files)
        for name in files:
            if kind_of(name) is not None:
                with contextlib.suppress(OSError):
                    stat = (Path(folder) / name).stat()
                    out[Path(folder) / name] = (stat.st_size, stat.st_mtime_ns)
        if seen >= MAX_SEEN:
            break
    return out


def written(root: Path, before: dict[Path, tuple[int, int]]) -> SeenLog | None:
    """The log the probe's run wrote with the most steps of metrics, or None."""
    best: tuple[Path, str, list[tuple[int, dict[str, float]]]] | None = None
    for path, stamp in snapshot(root).items():
        kind = kind_of(path.name)
        if kind is None or before.get(path) == stamp:
            continue
        rows = rows_of(path, kind)
        if rows and (best is None or len({s for s, _ in rows}) > len({s for s, _ in best[2]})):
            best = (path, kind, rows)
    if best is None:
        return None
    path, kind, rows = best
    relative = path.relative_to(root)
    folders = [re.sub(r"\d+", "*", part) for part in relative.parts[:-1]]
    glob = "/".join(folders) + "/" if kind == "tensorboard" else "/".join([*folders, relative.name])
    return SeenLog(kind, str(relative), glob, rows, _unit(path, kind))


def _unit(path: Path, kind: str) -> str:
    if kind == "tensorboard":
        return "TensorBoard's step"
    head = path.read_text(encoding="utf-8", errors="replace")[:4096]
    key = next((k for k in STEP_KEYS if re.search(rf"(^|[\s,\"']){k}([\s,\"']|$)", head.splitlines()[0] if head else "")), None)
    return f"the '{key}' {'column' if kind == 'csv' else 'key'}" if key else "its step"
