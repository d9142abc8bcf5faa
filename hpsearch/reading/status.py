"""``hpsearch status SPEC``: one screen for a running study, read from the storage only.

``gather(spec)`` reads the study (read-only; it writes nothing and creates nothing) into a
``Status``; ``hpsearch.reading.status_view`` draws it and runs the command. Whether a RUNNING trial's process
is dead is not decided here: ``hpsearch.study.liveness.Observer`` decides it, as it does for the
engine (a local pid that is gone: dead at once; elsewhere: a beat that did not move during one
grace period this reader watched). ``--watch`` keeps one Observer between refreshes, so the screen
can also say whether a trial's counter moved.

What the storage can and cannot say:
- a worker is a process ("host:pid", user attribute ``worker``); its *slots* are the most
  trials its host was seen running at once (from the trials' start and end times);
- a heartbeat is a counter (``hpsearch:beat``), not a time: one snapshot shows how many beats
  a trial made in its age; only a watcher that sees it twice can tell that it moved;
- times are the workers' clocks: ages assume this machine's clock agrees with theirs (Optuna 5
  stores UTC and returns this machine's local time; Optuna 4 stored the writer's local time).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hpsearch.reading.results import load_study, metric_names
from hpsearch.search.trust import StepTrust
from hpsearch.study.counts import CLAIMED, FINISHED, IMPORTED_FROM, own_best, reason
from hpsearch.study.liveness import BEAT, WORKER, Observer, intervals
from hpsearch.study.storage import redact
from hpsearch.study.trust import rows as trust_rows

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from hpsearch.spec.loader import Spec

FAILURES = 5  # recent failures shown
RATE_WINDOW = 20  # the ETA's rate is measured over at most this many of the latest finished trials
PAUSE_S = 300  # seconds with no trial running that end a run of the study (one slot's gap between trials: well under 1 s)


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
    dead: str | None = None  # liveness's verdict: why its process is dead; None: alive or not decided yet


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
    trust: list[StepTrust] | None = None  # the pruning trust gate's verdict per epoch; None without a gate

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------- gathering


def gather(
    spec: Spec,
    failures: int = FAILURES,
    now: datetime | None = None,
    study: optuna.Study | None = None,
    observer: Observer | None = None,
) -> Status:
    """The study's state, read only from the storage. UserError (one line) when there is no such study.

    ``study``: one opened before (``--watch``): Optuna caches its finished trials, so a refresh
    reads only the trials that are new or were unfinished. ``observer``: the one that watched
    the earlier refreshes (``--watch``); a fresh one sees the beats for the first time."""
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
        running=watch_beats(trials, running(trials, now), observer or Observer(grace=grace_s)),
        failures=recent_failures(trials, failures),
        trust=trust_rows(study),
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


def watch_beats(trials: list[FrozenTrial], rows: list[Running], observer: Observer) -> list[Running]:
    """Fill each row's ``dead`` and ``beat_still_s`` from one look of liveness's Observer; returns ``rows``.

    The Observer keeps (beat, when first seen at that beat) per trial: a beat that differs from
    the one seen before this look moved (0 s still); one seen before and unchanged has stood
    still since then; a trial seen for the first time has no history (None)."""
    before = dict(observer.seen)
    dead, _ = observer.judge([t for t in trials if state_is(t, "RUNNING")])  # reads only: burying is the engine's
    now = observer.clock()
    reasons = {d.trial.number: d.reason.removeprefix("failed: ") for d in dead}
    for r in rows:
        first, latest = before.get(r.number), observer.seen.get(r.number)
        if first is None or latest is None:
            r.beat_still_s = None
        else:
            r.beat_still_s = 0.0 if first[0] != latest[0] else now - latest[1]
        r.dead = reasons.get(r.number)
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
