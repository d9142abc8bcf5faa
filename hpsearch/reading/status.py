"""``hpsearch status SPEC``: one screen for a running study, read from the storage only.

``gather(spec)`` reads the study (read-only; it writes nothing and creates nothing) into a
``Status``; ``screen``/``render_text``/``render_rich`` draw it; ``BeatWatch`` remembers beats
between ``--watch`` refreshes, so the screen can say whether a trial's counter moved.

What the storage can and cannot say:
- a worker is a process ("host:pid", user attribute ``worker``); its *slots* are the most
  trials its host was seen running at once (from the trials' start and end times);
- a heartbeat is a counter (``hpsearch:beat``), not a time: one snapshot shows how many beats
  a trial made in its age; only a watcher that sees it twice can tell that it moved;
- times are the workers' clocks: ages assume this machine's clock agrees with theirs (Optuna 5
  stores UTC and returns this machine's local time; Optuna 4 stored the writer's local time).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hpsearch.base.errors import UserError
from hpsearch.base.text import fmt
from hpsearch.reading.results import load_study, metric_names, plain_table
from hpsearch.study.counts import CLAIMED, FINISHED, IMPORTED_FROM, own_best, reason
from hpsearch.study.liveness import BEAT, WORKER, intervals
from hpsearch.study.storage import redact

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial
    from rich.console import RenderableType

    from hpsearch.spec.loader import Spec

FAILURES = 5  # recent failures shown
RATE_WINDOW = 20  # the ETA's rate is measured over at most this many of the latest finished trials
PAUSE_S = 300  # seconds with no trial running that end a run of the study (one slot's gap between trials: well under 1 s)
WORKERS_SHOWN = 12  # rows of the workers table on screen (--json has them all)


@dataclass
class Worker:
    name: str  # "host:pid", or "ray" / "-" for trials without a worker attribute
    host: str
    pid: int | None
    slots: int  # most trials this host was seen running at once
    running: list[int]  # trial numbers it runs now
    beat: int | None  # beat counter of its (latest) running trial
    last_seen: str | None  # latest start or end of one of its trials (ISO, the worker's clock)
    done: int  # completed + pruned
    failed: int


@dataclass
class Running:
    number: int
    epoch: int | None  # last epoch reported (intermediate value step)
    epochs: int | None  # the config's epochs, when it has that key
    started: str | None
    elapsed_s: float | None
    worker: str
    beat: int | None
    beat_still_s: float | None = None  # --watch: seconds the beat was seen unchanged (0: it moved); None: not watched yet


@dataclass
class Failure:
    number: int
    ended: str | None
    worker: str
    reason: str
    retried_as: int | None  # the trial that re-runs its config, if any


@dataclass
class Budget:
    done: int  # completed + pruned: what budget.trials counts
    total: int
    claimed: int  # running + done: the share the workers hold
    running: int
    waiting: int  # queued configs (retries, warm starts)
    pruned: int
    failed: int
    timeout_s: float | None  # budget.timeout: per invocation, so not trackable from the storage
    rate_per_min: float | None  # finished trials per minute, recently
    eta_s: float | None
    eta_note: str  # how the ETA was made, or why there is none


@dataclass
class Best:
    metrics: list[str]
    values: list[float] | None  # None: nothing completed yet
    number: int | None
    pareto: int  # Pareto-optimal trials (several metrics); 0 for one metric


@dataclass
class Status:
    study: str
    storage: str  # password redacted
    at: str  # when this was read (this machine's clock)
    heartbeat_s: float  # beat interval this reader assumes (HPSEARCH_HEARTBEAT_S)
    grace_s: float
    budget: Budget
    best: Best
    workers: list[Worker]
    running: list[Running]
    failures: list[Failure]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------- gathering


def gather(spec: Spec, failures: int = FAILURES, now: datetime | None = None, study: optuna.Study | None = None) -> Status:
    """The study's state, read only from the storage. UserError (one line) when there is no such study.

    ``study``: one opened before (``--watch``): Optuna caches its finished trials, so a refresh
    reads only the trials that are new or were unfinished."""
    study = study or load_study(spec)
    # trials imported by warm_start.study ran in another study: not this one's budget, workers or best
    trials = [t for t in study.get_trials(deepcopy=False) if IMPORTED_FROM not in t.user_attrs]
    now = now or datetime.now()
    beat_s, grace_s = intervals()
    return Status(
        study=spec.study,
        storage=redact(spec.storage_url),
        at=now.isoformat(timespec="seconds"),
        heartbeat_s=beat_s,
        grace_s=grace_s,
        budget=budget(trials, spec, now),
        best=best(study, spec),
        workers=workers(trials, now),
        running=running(trials, now),
        failures=recent_failures(trials, failures),
    )


def worker_of(trial: FrozenTrial) -> str:
    name = trial.user_attrs.get(WORKER)
    if name:
        return str(name)
    return "ray" if trial.user_attrs.get("backend") == "ray" else "-"


def split_worker(name: str) -> tuple[str, int | None]:
    host, sep, pid = name.rpartition(":")
    return (host, int(pid)) if sep and pid.isdigit() else (name, None)


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None


def state_is(trial: FrozenTrial, *names: str) -> bool:
    return trial.state.name in names


def running(trials: list[FrozenTrial], now: datetime) -> list[Running]:
    rows = []
    for t in sorted((t for t in trials if state_is(t, "RUNNING")), key=lambda t: t.number):
        epochs = (t.user_attrs.get("config") or {}).get("epochs")
        rows.append(
            Running(
                number=t.number,
                epoch=t.last_step,
                epochs=epochs if isinstance(epochs, int) else None,
                started=iso(t.datetime_start),
                elapsed_s=(now - t.datetime_start).total_seconds() if t.datetime_start else None,
                worker=worker_of(t),
                beat=_beat(t),
            )
        )
    return rows


def _beat(trial: FrozenTrial) -> int | None:
    beat = trial.system_attrs.get(BEAT)
    return beat if isinstance(beat, int) else None


def workers(trials: list[FrozenTrial], now: datetime) -> list[Worker]:
    """One row per process that ran a trial: those running one first, then the most recently seen."""
    by_name: dict[str, list[FrozenTrial]] = {}
    for t in trials:
        if t.datetime_start is not None:  # WAITING trials belong to no one yet
            by_name.setdefault(worker_of(t), []).append(t)
    slots = host_slots(by_name, now)
    rows = [worker_row(name, mine, slots) for name, mine in by_name.items()]
    rows.sort(key=lambda w: w.last_seen or "", reverse=True)
    rows.sort(key=lambda w: not w.running)
    return rows


def worker_row(name: str, mine: list[FrozenTrial], slots: dict[str, int]) -> Worker:
    host, pid = split_worker(name)
    live = sorted((t for t in mine if state_is(t, "RUNNING")), key=lambda t: t.number)
    moments = [m for t in mine for m in (t.datetime_start, t.datetime_complete) if m is not None]
    return Worker(
        name=name,
        host=host,
        pid=pid,
        slots=slots.get(host, 0),
        running=[t.number for t in live],
        beat=_beat(live[-1]) if live else None,
        last_seen=iso(max(moments, default=None)),
        done=sum(state_is(t, "COMPLETE", "PRUNED") for t in mine),
        failed=sum(state_is(t, "FAIL") for t in mine),
    )


def host_slots(by_name: dict[str, list[FrozenTrial]], now: datetime) -> dict[str, int]:
    """Per host, the most trials that overlapped in time (a running trial lasts until now)."""
    spans: dict[str, list[tuple[datetime, datetime]]] = {}
    for name, mine in by_name.items():
        host = split_worker(name)[0]
        spans.setdefault(host, []).extend((t.datetime_start, t.datetime_complete or now) for t in mine if t.datetime_start)
    return {host: peak_overlap(s) for host, s in spans.items()}


def peak_overlap(spans: Iterable[tuple[datetime, datetime]]) -> int:
    # an end sorts before a start at the same moment: back-to-back trials of one slot do not overlap
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = level = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def recent_failures(trials: list[FrozenTrial], n: int) -> list[Failure]:
    retried = {t.user_attrs["retry_of"]: t.number for t in trials if isinstance(t.user_attrs.get("retry_of"), int)}
    failed = [t for t in trials if state_is(t, "FAIL")]
    failed.sort(key=lambda t: (t.datetime_complete or datetime.min, t.number), reverse=True)
    return [Failure(t.number, iso(t.datetime_complete), worker_of(t), str(reason(t)), retried.get(t.number)) for t in failed[:n]]


def budget(trials: list[FrozenTrial], spec: Spec, now: datetime) -> Budget:
    count: dict[str, int] = {}
    for t in trials:
        count[t.state.name] = count.get(t.state.name, 0) + 1
    done = sum(count.get(s.name, 0) for s in FINISHED)
    rate, seconds, note = eta(trials, spec.budget.trials - done, count.get("RUNNING", 0), now)
    return Budget(
        done=done,
        total=spec.budget.trials,
        claimed=sum(count.get(s.name, 0) for s in CLAIMED),
        running=count.get("RUNNING", 0),
        waiting=count.get("WAITING", 0),
        pruned=count.get("PRUNED", 0),
        failed=count.get("FAIL", 0),
        timeout_s=spec.budget.timeout,
        rate_per_min=rate,
        eta_s=seconds,
        eta_note=note,
    )


def eta(trials: list[FrozenTrial], left: int, n_running: int, now: datetime) -> tuple[float | None, float | None, str]:
    """(finished trials per minute, seconds to the budget, how it was measured or why unknown).

    The rate counts trials finished since the current run began (the end of the last pause:
    PAUSE_S with no trial running), at most the latest RATE_WINDOW of them, up to now: an
    hour-long pause between two runs of the study does not slow the estimate, a stall now does."""
    if left <= 0:
        return None, 0.0, "budget reached"
    if not n_running:
        return None, None, "no trial is running"
    begun = session_start(trials, now)
    ends = sorted(
        t.datetime_complete
        for t in trials
        if t.state.name in ("COMPLETE", "PRUNED") and t.datetime_complete and t.datetime_complete >= begun
    )
    if len(ends) < 2:
        return None, None, "fewer than 2 trials finished since this run began"
    if len(ends) > RATE_WINDOW:
        ends, begun = ends[-RATE_WINDOW:], ends[-RATE_WINDOW - 1]
    minutes = (now - begun).total_seconds() / 60
    if minutes <= 0:
        return None, None, "no time has passed"
    rate = len(ends) / minutes
    return rate, left / rate * 60, f"{rate:.3g} trials/min over the last {len(ends)} finished"


def session_start(trials: list[FrozenTrial], now: datetime) -> datetime:
    """Start of the latest stretch of time with no pause longer than PAUSE_S between trials."""
    spans = sorted((t.datetime_start, t.datetime_complete or now) for t in trials if t.datetime_start)
    begun, reach = now, datetime.min
    for start, end in spans:
        if (start - reach).total_seconds() > PAUSE_S:
            begun = start
        reach = max(reach, end)
    return begun


def best(study: optuna.Study, spec: Spec) -> Best:
    names = metric_names(study, spec)
    tops = own_best(study)
    if not tops:  # nothing completed yet
        return Best(names, None, None, 0)
    if len(study.directions) > 1:
        return Best(names, None, None, len(tops))
    return Best(names, list(tops[0].values), tops[0].number, 0)


# ---------------------------------------------------------------------------- --watch


@dataclass
class BeatWatch:
    """Beats seen at earlier refreshes: fills ``Running.beat_still_s`` (``clock`` in seconds, injectable)."""

    clock: Callable[[], float] = time.monotonic
    seen: dict[int, tuple[int | None, float]] = field(default_factory=dict)  # trial -> (beat, when first seen at that beat)

    def update(self, status: Status) -> Status:
        now = self.clock()
        for r in status.running:
            before = self.seen.get(r.number)
            if before is None or before[0] != r.beat:
                self.seen[r.number] = (r.beat, now)
                r.beat_still_s = None if before is None else 0.0
            else:
                r.beat_still_s = now - before[1]
        alive = {r.number for r in status.running}
        self.seen = {k: v for k, v in self.seen.items() if k in alive}
        return status


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


def heartbeat_text(r: Running, grace_s: float) -> str:
    if r.beat is None:
        return "-"
    text = f"{r.beat} in {duration(r.elapsed_s)}"
    if r.beat_still_s is None:
        return text
    if r.beat_still_s == 0:
        return f"{text}, moved"
    stale = " (dead? no beat for a grace period)" if r.beat_still_s >= grace_s else ""
    return f"{text}, still {duration(r.beat_still_s)}{stale}"


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


Section = tuple[str, list[str], list[list[Any]], str]  # title, header, rows, a note on how to read it


def screen(s: Status) -> tuple[list[str], list[Section]]:
    """What both renderings show: heading lines, then titled tables."""
    heading = [f"{s.study} · {s.storage} · read {clock_time(s.at)}", budget_line(s.budget), best_line(s.best)]
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
            [[r.number, _epoch(r), duration(r.elapsed_s), r.worker, heartbeat_text(r, s.grace_s)] for r in s.running],
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
    return heartbeat_text(mine[-1], s.grace_s) if mine else "-"


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
    beats: BeatWatch = field(default_factory=BeatWatch)
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
            self.last, self.problem = self.beats.update(gather(self.spec, study=self.study)), None
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
