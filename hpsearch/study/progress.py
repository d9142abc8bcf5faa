"""Study progress: a live status line on a terminal, plain lines elsewhere or with --quiet.

The status line: trials done/total, running, pruned, failed, best so far, elapsed time; as a
plain line after each trial off a terminal or with --quiet. Per-epoch lines go above it (not
with --quiet).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from hpsearch.base.text import fmt


@dataclass
class Counts:
    total: int
    done: int = 0  # completed + pruned, this study, all invocations
    running: int = 0
    pruned: int = 0
    failed: int = 0
    best: str = "-"
    started: float = field(default_factory=time.monotonic)

    def line(self, name: str) -> str:
        elapsed = int(time.monotonic() - self.started)
        return (
            f"{name}: {self.done}/{self.total} done, {self.running} running, {self.pruned} pruned, "
            f"{self.failed} failed | best {self.best} | {elapsed // 60}:{elapsed % 60:02d}"
        )


class Progress:
    """Prints study and epoch progress. ``live`` uses rich's Live display (TTY only)."""

    def __init__(self, study: str, total: int, quiet: bool = False, stream: Any = None):
        self.study = study
        self.counts = Counts(total)
        self.quiet = quiet
        self.stream = stream or sys.stdout
        self.live_display: Any = None
        if not quiet and self.stream.isatty():
            from rich.console import Console
            from rich.live import Live

            self.console = Console(file=self.stream)
            self.live_display = Live(self.counts.line(study), console=self.console, refresh_per_second=4, transient=False)

    def __enter__(self) -> Progress:
        if self.live_display is not None:
            self.live_display.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live_display is not None:
            self.live_display.update(self.counts.line(self.study))
            self.live_display.stop()

    def print(self, text: str) -> None:
        if self.live_display is not None:
            self.console.print(text, markup=False, highlight=False)
            self.live_display.update(self.counts.line(self.study))
        else:
            print(text, file=self.stream, flush=True)

    def refresh(self) -> None:
        if self.live_display is not None:
            self.live_display.update(self.counts.line(self.study))

    def epoch(self, trial: int, epoch: int, epochs: Any, metrics: dict[str, float]) -> None:
        if self.quiet:
            return
        shown = " ".join(f"{k}={fmt(v)}" for k, v in metrics.items())
        self.print(f"  trial {trial} epoch {epoch}/{epochs if epochs else '?'}: {shown}")

    def trial(self, number: int, reason: str, value: str, params: dict[str, Any]) -> None:
        shown = ", ".join(f"{k}={fmt(v)}" for k, v in params.items())
        self.print(f"trial {number} {reason}: {value} [{shown}]")
        if self.live_display is None:  # --quiet drops epoch lines, not this one
            self.print(self.counts.line(self.study))
