"""The script's output as per-epoch reports: stdout lines (JSON, ``name=value``) or TensorBoard scalars."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from hpsearch.trial.command.options import Command
from hpsearch.trial.reporter import ScriptReporter

EPOCH_WORD = re.compile(r"\bepoch\s*[=: ]\s*(\d+)", re.IGNORECASE)


class MetricReader:
    """Turns the script's output into ``reporter.report`` calls; remembers the final metrics."""

    def __init__(self, command: Command, tb_dir: Path, reporter: ScriptReporter):
        self.command, self.tb_dir, self.reporter = command, tb_dir, reporter
        self.pattern = re.compile(command.pattern)
        self.last: dict[str, float] = {}
        self.final_line: dict[str, float] | None = None
        self.tb_rows: dict[int, dict[str, float]] = {}
        self.tb_reported = 0  # the highest step handed to the reporter
        self.tb_offsets: dict[Path, int] = {}

    def line(self, text: str) -> None:
        fmt = self.command.metrics
        if fmt == "tensorboard":
            return
        stripped = text.strip()
        if fmt in ("auto", "json") and stripped.startswith("{"):
            if self._json(stripped):
                return
        if fmt in ("auto", "kv"):
            self._kv(stripped)

    def _json(self, text: str) -> bool:
        try:
            data = json.loads(text)
        except ValueError:
            return False
        if not isinstance(data, dict):
            return False
        numbers = {k: float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        epoch = data.get("epoch")
        if isinstance(epoch, int) and not isinstance(epoch, bool) and not data.get("final"):
            numbers.pop("epoch", None)
            self._report(epoch, numbers)
        elif numbers:  # a line without an epoch (or with "final": true): the final metrics
            numbers.pop("epoch", None)
            self.final_line = numbers
        return True

    def _kv(self, text: str) -> None:
        pairs = {m["name"]: m["value"] for m in self.pattern.finditer(text)}
        epoch_text = next((v for k, v in pairs.items() if k.lower() == "epoch"), None)
        if epoch_text is None:
            found = EPOCH_WORD.search(text)
            epoch_text = found.group(1) if found else None
        try:
            epoch = int(float(epoch_text)) if epoch_text is not None else None
        except ValueError:
            epoch = None
        metrics = {k: float(v) for k, v in pairs.items() if k.lower() != "epoch"}
        if epoch is not None and metrics:  # lines without an epoch (settings, progress bars) are not reports
            self._report(epoch, metrics)

    def _report(self, epoch: int, metrics: dict[str, float]) -> None:
        self.last = {"epoch": float(epoch), **metrics}
        self.reporter.report(epoch, metrics)

    def poll_events(self, done: bool) -> None:
        """Read new scalars from the script's TensorBoard files; a step is reported once a later step
        appears (its scalars are all written), the last one when the script has exited."""
        if self.command.metrics != "tensorboard" or not self.tb_dir.is_dir():
            return
        for path in sorted(self.tb_dir.rglob("events.out.tfevents.*")):
            for step, tag, value in self._read_new(path):
                self.tb_rows.setdefault(step, {})[tag.replace("/", "_")] = value
        ready = sorted(s for s in self.tb_rows if s > self.tb_reported)
        finished = ready if done else ready[:-1]
        for step in finished:
            self._report(step, self.tb_rows[step])
            self.tb_reported = step

    def _read_new(self, path: Path) -> list[tuple[int, str, float]]:
        from tensorboard.compat.proto import event_pb2

        data = path.read_bytes()
        offset, out = self.tb_offsets.get(path, 0), []
        while offset + 12 <= len(data):
            length = int.from_bytes(data[offset : offset + 8], "little")
            end = offset + 12 + length + 4  # length, its crc, the record, its crc
            if end > len(data):
                break  # a record still being written
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            for value in event.summary.value:
                number = _scalar(value)
                if number is not None:
                    out.append((int(event.step), value.tag, number))
            offset = end
        self.tb_offsets[path] = offset
        return out

    def final(self) -> dict[str, float]:
        """The final JSON line when the script printed one, over the last report."""
        last = {k: v for k, v in self.last.items() if k != "epoch"}
        merged = {**last, **(self.final_line or {})}
        if "epochs" not in merged and "epoch" in self.last and math.isfinite(self.last["epoch"]):
            merged["epochs"] = self.last["epoch"]
        return merged


def _scalar(value: Any) -> float | None:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor") and value.tensor.float_val:  # torch's SummaryWriter writes simple_value; TF2 writes tensors
        return float(value.tensor.float_val[0])
    if value.HasField("tensor") and value.tensor.double_val:
        return float(value.tensor.double_val[0])
    return None
