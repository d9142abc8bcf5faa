"""The metrics a script writes to files: TensorBoard event files, CSV logs and JSON lines (detectron2's
``metrics.json``, MMEngine's ``scalars.json``), read as they grow.

``logs`` is a path or glob relative to the trial's working folder (``lightning_logs/version_*/``).
Of the runs it matches (folders or files), the one read is the newest that was written since the
trial started: a run left by an earlier attempt is never read again, and a run started later (a
new ``version_N``) takes over.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
from pathlib import Path
from typing import Any

from hpsearch.trial.command.lines import STEP_KEYS

Rows = list[tuple[int, dict[str, float]]]  # (step, its metrics) in the order written
EVENTS = "events.out.tfevents.*"
GLOBS = {"tensorboard": (EVENTS,), "csv": ("*.csv",), "jsonl": ("*.json", "*.jsonl")}  # the data files in a run's folder


class LogFolder:
    def __init__(self, pattern: Path, kind: str):
        self.pattern, self.kind = pattern, kind  # kind: tensorboard | csv | jsonl
        self.before = {p: _stamp(p) for p in self._files()}  # what an earlier attempt left
        self.order: dict[Path, int] = {}  # run -> when it was first seen written (our poll count)
        self.offsets: dict[Path, int] = {p: stamp[0] for p, stamp in self.before.items() if stamp}  # TensorBoard: bytes read
        self.csv_seen: dict[Path, tuple[int, int]] = {}

    def _runs(self) -> list[Path]:
        return sorted(Path(p) for p in glob.glob(str(self.pattern), recursive=True))

    def _data(self, run: Path) -> list[Path]:
        if run.is_file():
            return [run]
        return sorted(p for glob_ in GLOBS[self.kind] for p in run.rglob(glob_)) if run.is_dir() else []

    def _files(self) -> list[Path]:
        return [f for run in self._runs() for f in self._data(run)]

    def current(self) -> list[Path]:
        """The data files of the newest run written since the trial started."""
        fresh = [run for run in self._runs() if any(_stamp(f) != self.before.get(f) for f in self._data(run))]
        for run in fresh:
            self.order.setdefault(run, len(self.order))
        if not fresh:
            return []
        newest = max(fresh, key=lambda run: (self.order[run], str(run)))
        return [f for f in self._data(newest) if _stamp(f) != self.before.get(f)]

    def read(self, done: bool) -> Rows:
        """New rows since the last call. CSV files are read whole whenever they change (loggers rewrite them)."""
        rows: Rows = []
        for path in self.current():
            if self.kind == "tensorboard":
                rows += self._events(path)
            elif self.kind == "csv":
                rows += self._csv(path, done)
            else:
                rows += self._jsonl(path)
        return rows

    def _events(self, path: Path) -> Rows:
        try:
            data = path.read_bytes()
        except OSError:
            return []
        out, self.offsets[path] = event_rows(data, self.offsets.get(path, 0))
        return out

    def _csv(self, path: Path, done: bool) -> Rows:
        stamp = _stamp(path)
        if stamp is None or (self.csv_seen.get(path) == stamp and not done):
            return []
        self.csv_seen[path] = stamp
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        if not done and not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]  # the last row is still being written
        return csv_rows(text)

    def _jsonl(self, path: Path) -> Rows:
        """JSON objects one per line, appended: the complete lines since the last read, each with its step key."""
        try:
            with open(path, "rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                data = handle.read()
        except OSError:
            return []
        whole = data[: data.rfind(b"\n") + 1]  # the last line may still be being written
        self.offsets[path] = self.offsets.get(path, 0) + len(whole)
        return jsonl_rows(whole.decode("utf-8", errors="replace"))


def event_rows(data: bytes, offset: int = 0) -> tuple[Rows, int]:
    """The scalars of a TensorBoard event file's complete records from ``offset``, and where they end."""
    from tensorboard.compat.proto import event_pb2

    out: Rows = []
    while offset + 12 <= len(data):
        length = int.from_bytes(data[offset : offset + 8], "little")
        end = offset + 12 + length + 4  # length, its crc, the record, its crc
        if end > len(data):
            break  # a record still being written
        event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
        values = {v.tag.replace("/", "_"): n for v in event.summary.value if (n := _scalar(v)) is not None}
        values = {k: v for k, v in values.items() if k not in STEP_KEYS}  # Lightning logs `epoch` as a scalar
        if values:
            out.append((int(event.step), values))
        offset = end
    return out, offset


def rows_of(path: Path, kind: str) -> Rows:
    """A whole log file's rows (``hpsearch init``'s probe: what a script wrote)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if kind == "tensorboard":
        return event_rows(data)[0]
    text = data.decode("utf-8", errors="replace")
    return csv_rows(text) if kind == "csv" else jsonl_rows(text)


def jsonl_rows(text: str) -> Rows:
    """Rows of JSON lines: each object's step from its first step key (``iteration`` in detectron2's
    ``metrics.json``), every other number a metric (``bbox/AP`` -> ``bbox_AP``); other lines skipped."""
    out: Rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        key = next((k for k in STEP_KEYS if isinstance(row, dict) and _number(row.get(k))), None)
        if key is None or not float(row[key]).is_integer():
            continue
        metrics = {k.replace("/", "_"): float(v) for k, v in row.items() if k not in STEP_KEYS and _number(v)}
        if metrics:
            out.append((int(row[key]), metrics))
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def csv_rows(text: str) -> Rows:
    """Rows of a CSV log with a header: the step column (``epoch``, ``step``, ``global_step``,
    ``iteration``, ``iter``: the first the header has), every other numeric cell a metric. Names
    and cells may be padded (YOLOv5's ``results.csv``: ``               epoch,      train/box_loss``)."""
    reader = csv.DictReader(io.StringIO(text), skipinitialspace=True)
    reader.fieldnames = [name.strip() for name in reader.fieldnames or []]
    fields = reader.fieldnames
    key = next((k for k in STEP_KEYS if k in fields), None)
    if key is None:
        return []
    out: Rows = []
    for row in reader:
        step = _float(row.get(key))
        if step is None or step != int(step):
            continue
        metrics = {k.replace("/", "_"): v for k, cell in row.items() if k and k not in STEP_KEYS and (v := _float(cell)) is not None}
        if metrics:
            out.append((int(step), metrics))
    return out


def _float(cell: Any) -> float | None:
    try:
        return float(cell) if isinstance(cell, str) and cell.strip() else None
    except ValueError:
        return None


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _scalar(value: Any) -> float | None:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor") and value.tensor.float_val:  # torch's SummaryWriter writes simple_value; TF2 writes tensors
        return float(value.tensor.float_val[0])
    if value.HasField("tensor") and value.tensor.double_val:
        return float(value.tensor.double_val[0])
    return None
