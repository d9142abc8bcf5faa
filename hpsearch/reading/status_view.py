"""``hpsearch status``'s screen and command: draw a ``Status`` (``hpsearch.reading.status``) as
rich tables on a terminal, plain text in a pipe, or JSON; ``--watch`` redraws it until Ctrl-C.

Split from status.py, which reads the storage into a ``Status``: reading and drawing change for
different reasons, and together they were 560 lines.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hpsearch.base.errors import UserError
from hpsearch.base.text import fmt
from hpsearch.reading.results import load_study, plain_table
from hpsearch.reading.status import Best, Budget, Running, Status, Worker, gather
from hpsearch.search.trust import StepTrust
from hpsearch.study.liveness import Observer
from hpsearch.study.storage import redact

if TYPE_CHECKING:
    import optuna
    from rich.console import RenderableType

    from hpsearch.spec.loader import Spec

WORKERS_SHOWN = 12  # rows of the workers table on screen (--json has them all)


# ---------------------------------------------------------------------------- rendering


def duration(seconds: float | None) -> str:
    """45s, 2m05s, 3h07m, 2d04h."""
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            return f"{s // size}{unit}{(s % size) // sub_size:02d}{sub}"
    return f"{s}s"


def clock_time(stamp: str | None) -> str:
    """An ISO time as HH:MM:SS, with the date when it is not today's."""
    if not stamp:
        return "-"
    moment = datetime.fromisoformat(stamp)
    return moment.strftime("%H:%M:%S" if moment.date() == datetime.now().date() else "%Y-%m-%d %H:%M:%S")


def heartbeat_text(r: Running) -> str:
    """Beats in the trial's age, whether the beat moved since the last refresh, and liveness's verdict."""
    parts = [] if r.beat is None else [f"{r.beat} in {duration(r.elapsed_s)}"]
    if r.beat_still_s is not None:
        parts.append("moved" if r.beat_still_s == 0 else f"still {duration(r.beat_still_s)}")
    if r.dead:
        parts.append(f"dead: {r.dead}")
    return ", ".join(parts) or "-"


def budget_line(b: Budget) -> str:
    parts = [f"{b.done}/{b.total} done"]
    parts += [
        f"{n} {what}" for n, what in ((b.pruned, "pruned"), (b.running, "running"), (b.waiting, "waiting"), (b.failed, "failed")) if n
    ]
    if b.eta_s == 0:
        line = f"budget: {', '.join(parts)}; {b.eta_note}"
    else:
        line = f"budget: {', '.join(parts)}; ETA {'unknown' if b.eta_s is None else '~' + duration(b.eta_s)} ({b.eta_note})"
    if b.timeout_s:
        line += f"; each run stops after budget.timeout={duration(b.timeout_s)}"
    return line


def best_line(b: Best) -> str:
    if b.pareto:
        return f"best: {b.pareto} Pareto-optimal trials ({', '.join(b.metrics)})"
    if b.values is None:
        return "best: - (no trial completed yet)"
    shown = ", ".join(f"{m}={v:.4g}" for m, v in zip(b.metrics, b.values, strict=False))
    return f"best: {shown} (trial {b.number})"


def trust_line(rows: list[StepTrust]) -> str:
    """``pruning trust: epoch 1: rank corr 0.21 (9 curves): not pruning; epoch 3: ...`` (search/trust.py)."""
    from hpsearch.study.trust import changes

    if not rows:
        return "pruning trust: no completed curves yet: nothing is pruned"
    return "pruning trust: " + "; ".join(r.text() for r in changes(rows))


Section = tuple[str, list[str], list[list[Any]], str]  # title, header, rows, a note on how to read it


def screen(s: Status) -> tuple[list[str], list[Section]]:
    """What both renderings show: heading lines, then titled tables."""
    heading = [f"{s.study} · {s.storage} · read {clock_time(s.at)}", budget_line(s.budget), best_line(s.best)]
    if s.trust is not None:
        heading.append(trust_line(s.trust))
    workers = s.workers[:WORKERS_SHOWN]
    hidden = len(s.workers) - len(workers)
    sections: list[Section] = [
        (
            f"workers ({len(s.workers)}{f', {hidden} not shown' if hidden else ''})",
            ["worker", "slots", "running", "heartbeat", "last seen", "done", "failed"],
            [
                [w.name, w.slots, ", ".join(map(str, w.running)) or "-", _worker_beat(w, s), clock_time(w.last_seen), w.done, w.failed]
                for w in workers
            ],
            f"slots = most trials seen at once on a host; heartbeat = beats in the running trial's age, one per {s.heartbeat_s:g} s",
        ),
        (
            f"running ({len(s.running)})",
            ["trial", "epoch", "elapsed", "worker", "heartbeat"],
            [[r.number, _epoch(r), duration(r.elapsed_s), r.worker, heartbeat_text(r)] for r in s.running],
            "",
        ),
        (
            f"recent failures ({len(s.failures)} of {s.budget.failed})",
            ["trial", "ended", "worker", "reason"],
            [
                [
                    f.number,
                    clock_time(f.ended),
                    f.worker,
                    f.reason + (f"; retried as trial {f.retried_as}" if f.retried_as is not None else ""),
                ]
                for f in s.failures
            ],
            "",
        ),
    ]
    return heading, [sec for sec in sections if sec[2]]


def _epoch(r: Running) -> str:
    if r.epoch is None:
        return "-"
    return f"{r.epoch}/{r.epochs}" if r.epochs else str(r.epoch)


def _worker_beat(w: Worker, s: Status) -> str:
    mine = [r for r in s.running if r.worker == w.name]
    return heartbeat_text(mine[-1]) if mine else "-"


def render_text(s: Status) -> str:
    heading, sections = screen(s)
    blocks = ["\n".join(heading)] + [
        f"{title}{f': {note}' if note else ''}\n{plain_table(header, rows)}" for title, header, rows, note in sections
    ]
    return "\n\n".join(blocks)


def render_rich(s: Status) -> RenderableType:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    heading, sections = screen(s)
    parts: list[RenderableType] = [Text(heading[0], style="bold"), *(Text(line) for line in heading[1:])]
    for title, header, rows, note in sections:
        table = Table(title=title, title_justify="left", caption=note or None, caption_justify="left")
        for i, name in enumerate(header):
            numeric = all(isinstance(row[i], (int, float)) for row in rows)
            table.add_column(name, justify="right" if numeric else "left", overflow="fold")
        for row in rows:
            table.add_row(*(fmt(v) for v in row))
        parts.append(table)
    return Group(*parts)


# ---------------------------------------------------------------------------- the command


def show(spec: Spec, watch: float | None = None, as_json: bool = False) -> None:
    """Print the status once, or (``watch``: seconds between refreshes) until Ctrl-C, which ends it quietly.

    A terminal gets rich tables, redrawn in place; a pipe gets plain text (each refresh appended,
    a blank line between) or, with ``as_json``, one JSON document (per refresh: one per line)."""
    if watch is None:
        status = gather(spec)
        if as_json:
            print(json.dumps(status.to_json(), indent=2))
        elif sys.stdout.isatty():
            from rich.console import Console

            Console().print(render_rich(status))
        else:
            print(render_text(status))
        return
    try:
        watcher = Watcher(spec)
        watcher.read()  # a missing study fails here, before any screen
        if sys.stdout.isatty() and not as_json:
            _live(watcher, watch)
        else:
            _append(watcher, watch, as_json)
    except KeyboardInterrupt:
        return


@dataclass
class Watcher:
    """``--watch``: the latest good read, the beats seen so far, and why the last refresh failed (if it did)."""

    spec: Spec
    observer: Observer = field(default_factory=Observer)  # liveness's, kept between refreshes: it sees beats move
    study: optuna.Study | None = None  # kept open between refreshes; opened again after a failure
    last: Status | None = None
    problem: str | None = None

    def read(self) -> Status:
        """The study now. After the first read a storage that cannot be read (a network blip, a
        locked or moved file) keeps the last good read on screen, with a line saying so."""
        import optuna
        import sqlalchemy.exc

        try:
            self.study = self.study or load_study(self.spec)
            self.last, self.problem = gather(self.spec, study=self.study, observer=self.observer), None
        except (UserError, sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
            self.study = None
            if self.last is None:
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.problem = f"refresh at {datetime.now():%H:%M:%S} failed: {redact(first)}; showing the read of {clock_time(self.last.at)}"
        return self.last

    def text(self) -> str:
        assert self.last is not None
        return render_text(self.last) + (f"\n{self.problem}" if self.problem else "")

    def json(self) -> str:
        assert self.last is not None
        return json.dumps({**self.last.to_json(), "refresh_error": self.problem})

    def renderable(self) -> RenderableType:
        from rich.console import Group
        from rich.text import Text

        assert self.last is not None
        shown = render_rich(self.last)
        return Group(shown, Text(self.problem, style="bold red")) if self.problem else shown


def _live(watcher: Watcher, every: float) -> None:
    from rich.live import Live

    with Live(watcher.renderable(), auto_refresh=False) as live:
        while True:
            time.sleep(every)
            watcher.read()
            live.update(watcher.renderable(), refresh=True)


def _append(watcher: Watcher, every: float, as_json: bool) -> None:
    while True:
        print(watcher.json() if as_json else watcher.text() + "\n", flush=True)
        time.sleep(every)
        watcher.read()
