"""The script's output as per-step reports: printed lines (lines.py) or log files (logs.py).

One report per step, in the step's own unit (epochs, iterations: what the script prints):

- a line with metrics for the current step reports it at once, unless it is a position inside the
  step (``200/2983 batches``): those metrics wait and go with the step's report;
- a line without a step belongs to the step above it (Keras prints ``Epoch 3/10`` on its own line);
- a step not yet reported when a later one begins (or when the script exits) is reported then,
  which is how log files (a step is complete once a later one is written) are read;
- when the spec's metric names are known (``reporter.metric_names``), only a step that has one of
  them is a report; the metrics of other steps go with the next report (nanoGPT's ``iter`` lines
  between two ``step N: val loss`` lines);
- a step below the current one is ignored, and lines before the first step (settings) are nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from hpsearch.trial.command.lines import (
    STEP,
    STEP_KEYS,
    Line,
    Table,
    from_mapping,
    json_object,
    read_auto,
    read_dict,
    read_pieces,
    read_regexes,
    visible,
)
from hpsearch.trial.command.logs import LogFolder
from hpsearch.trial.command.options import KV_PATTERN, LOG_FORMATS, Command
from hpsearch.trial.reporter import ScriptReporter


class Steps:
    """Per-step rows, each handed to the reporter once."""

    def __init__(self, reporter: ScriptReporter, names: set[str] | None):
        self.reporter, self.names = reporter, names
        self.current: int | None = None
        self.row: dict[str, float] = {}  # the current step's metrics, not yet reported
        self.reported: int | None = None
        self.last: dict[str, float] = {}  # the last reported step's metrics, and what came for it later
        self.carried: dict[str, float] = {}  # metrics of steps that had none of the spec's metrics
        self.seen: set[str] = set()  # every metric name read (for the error when the spec's never shows)
        self.sent: set[str] = set()  # the metric names of the reports made
        self.unit: str | None = None  # the word of the first step (epoch, step, iter...), for messages

    def add(self, step: int | None, metrics: dict[str, float], ready: bool) -> None:
        self.seen.update(metrics)
        if step is not None and self.current is not None and step < self.current:
            return
        if step is not None and step != self.current:
            self._advance(step)
        if self.current is None:
            return
        if self.current == self.reported:
            self.last.update(metrics)
            return
        self.row.update(metrics)
        if ready and metrics and self._wanted():  # a blank line or a step alone reports nothing
            self._report()

    def _advance(self, step: int) -> None:
        if self.current is not None and self.current != self.reported and self.row:
            if self._wanted():
                self._report()
            else:
                self.carried.update(self.row)
        self.current, self.row = step, {}

    def _wanted(self) -> bool:
        return bool(self.row) and (self.names is None or not self.names.isdisjoint(self.row))

    def _report(self) -> None:
        assert self.current is not None
        metrics, self.carried = {**self.carried, **self.row}, {}
        self.reported, self.last, self.row = self.current, dict(metrics), {}
        self.sent.update(metrics)
        self.reporter.report(self.current, metrics)

    def end(self) -> None:
        """The script exited: its last step, if complete enough to be a report."""
        if self.current is not None and self.current != self.reported and self._wanted():
            self._report()


class MetricReader:
    """Turns the script's output into ``reporter.report`` calls; remembers the final metrics."""

    def __init__(self, command: Command, tb_dir: Path, reporter: ScriptReporter, workdir: Path | None = None):
        self.command = command
        names = getattr(reporter, "metric_names", None)
        self.steps = Steps(reporter, set(names) if names else None)
        self.pattern = re.compile(command.pattern) if command.pattern != KV_PATTERN or command.metrics == "kv" else None
        self.regexes = {k: re.compile(v) for k, v in command.regexes.items()}
        self.final_line: dict[str, float] | None = None
        self.table = Table()  # fastai's epochs: a header over rows
        self.logs: LogFolder | None = None
        if command.metrics in LOG_FORMATS:
            where = Path(command.logs) if command.logs else tb_dir
            self.logs = LogFolder(where if where.is_absolute() else (workdir or Path(command.cwd)) / where, command.metrics)

    def line(self, text: str) -> None:
        parsed = self._parse(text)
        if parsed is None:
            return
        if parsed.final:
            if parsed.metrics:
                self.final_line = {**(self.final_line or {}), **parsed.metrics}
            return
        if parsed.step is not None and self.steps.unit is None:
            self.steps.unit = _unit(text)
        self.steps.add(parsed.step, parsed.metrics, ready=not parsed.inside)

    def _parse(self, text: str) -> Line | None:
        fmt = self.command.metrics
        if fmt in LOG_FORMATS:
            return None
        if fmt == "regex":
            return read_regexes(text, self.regexes)
        shown = visible(text)
        if shown is None:
            return None
        if fmt == "auto" and (row := self.table.read(shown)) is not None:
            self.steps.unit = self.steps.unit or self.table.unit
            return row
        if fmt == "json" or (fmt == "auto" and shown.lstrip().startswith("{")):
            found = read_dict(shown) if fmt == "auto" else _json_only(shown)
            if found is not None or fmt == "json":
                return found
        if fmt == "kv" or self.pattern is not None:
            return read_pieces(shown, self.pattern or re.compile(KV_PATTERN))
        return read_auto(shown)

    def poll_events(self, done: bool) -> None:
        """Read what the script's log files gained; a step is reported once a later step appears,
        the last one when the script has exited."""
        if self.logs is None:
            return
        for step, values in self.logs.read(done):
            self.steps.add(step, values, ready=False)
        if done:
            self.steps.end()

    def end(self) -> None:
        self.poll_events(done=True)
        if self.logs is None:
            self.steps.end()

    def final(self) -> dict[str, float]:
        """The final JSON line when the script printed one, over the last report."""
        merged = {**self.steps.last, **(self.final_line or {})}
        if "epochs" not in merged and self.steps.reported is not None:
            merged["epochs"] = float(self.steps.reported)
        return merged

    def found(self) -> list[str]:
        """Every metric name read, reported or not."""
        return sorted(self.steps.seen | set(self.final_line or {}))

    def delivered(self) -> set[str]:
        """The metric names in the reports and the final line: what the trial's result can hold."""
        return self.steps.sent | set(self.final_line or {})


def _json_only(text: str) -> Line | None:
    data = json_object(text.strip())
    return from_mapping(data) if data is not None else None


def _unit(text: str) -> str:
    m = STEP.search(text)
    if m:
        return f"'{m['word'].lower()} N'"
    key = next((k for k in STEP_KEYS if re.search(rf"[\"']{k}[\"']\s*:", text)), None)  # a dict's or JSON line's
    return f"the '{key}' key" if key else "a step key"
