"""Is a RUNNING trial's process still alive? Decided here, by observation, in one place.

Every process that runs a trial stamps it with who it is (host, boot id, pid, the pid's start
time) and beats: a counter in the trial's system attributes, raised every HPSEARCH_HEARTBEAT_S.
A RUNNING trial is dead when either
- its process was on this machine (same host and boot) and that pid is gone or is now
  another program: dead at once; or
- its counter did not move during one full HPSEARCH_GRACE_S that *this* process watched.
A counter, not a timestamp, so neither clock skew between machines nor a database's
whole-second ``CURRENT_TIMESTAMP`` can hide or fake a beat.

A dead trial is failed with a reason and its config queued again (``MAX_RETRY`` times at most);
Optuna hands WAITING trials out first, so the retry is the next trial any worker claims. The
reason is "process died", or what the process noted beside the study when it stopped without
reaching the storage (``note_stopped``: an outage past its limit).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.base.errors import StorageUnreachable, UserError
from hpsearch.base.interrupts import atomic
from hpsearch.study.deaths import no_heartbeat, pid_gone
from hpsearch.study.storage import OUTAGE, end_trial, set_attrs, storage_of, study_id, trial_id


def _env_seconds(name: str, default: float) -> float:
    """Seconds from the environment (tests shorten both)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UserError(f"{name}={text!r}: expected a number of seconds > 0")
    return value


def intervals() -> tuple[float, float]:
    """(heartbeat, grace) in seconds: a running trial's process beats every HPSEARCH_HEARTBEAT_S (10);
    a beat that does not move for HPSEARCH_GRACE_S (30), watched, means its process is dead."""
    beat, grace = _env_seconds("HPSEARCH_HEARTBEAT_S", 10.0), _env_seconds("HPSEARCH_GRACE_S", 30.0)
    if grace <= beat:
        raise UserError(f"HPSEARCH_GRACE_S={grace:g} must be longer than HPSEARCH_HEARTBEAT_S={beat:g}")
    return beat, grace


MAX_RETRY = 3  # a config whose process died is queued again at most this often
RERUN_KEYS = ("source_study", "source_trial", "seed", "rerun_config")  # a promote/audit re-run (study/rerun_queue.py) stays that run
BEAT = "hpsearch:beat"  # system attribute: how many times the trial's process has beaten
PROCESS = "hpsearch:process"  # system attribute: the identity below
WORKER = "worker"  # user attribute "host:pid", shown in tables and the dashboard
STOPPED = "stopped"  # folder in <output>/<study>/: one note per process that stopped with trials it could not end


# ---------------------------------------------------------------------------- who runs a trial


def _boot_id() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return ""


def _start_time(pid: int) -> str | None:
    """The pid's start time in clock ticks since boot (Linux), which tells a reused pid apart; None if no such pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None if not _pid_exists(pid) else ""
    fields = stat.rsplit(")", 1)[1].split()  # counted after the command name, which may hold spaces
    if fields[0] == "Z":  # a zombie has ended; only its parent's wait is missing (or pid 1 never reaps, in some containers)
        return None
    return fields[19]  # field 22


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


HOST = socket.gethostname()
BOOT = _boot_id()


def identity(pid: int | None = None) -> dict[str, Any]:
    pid = os.getpid() if pid is None else pid
    return {"host": HOST, "boot": BOOT, "pid": pid, "start": _start_time(pid) or ""}


def worker_name(pid: int | None = None) -> str:
    return f"{HOST}:{os.getpid() if pid is None else pid}"


def local_verdict(who: Any) -> bool | None:
    """True: that process runs here; False: it ran here and is gone; None: not this machine (or unknown)."""
    if not isinstance(who, dict) or who.get("host") != HOST or who.get("boot") != BOOT or not isinstance(who.get("pid"), int):
        return None
    start = _start_time(who["pid"])
    if start is None:
        return False
    return not (who.get("start") and start and start != who["start"])  # a pid reused by another program


def stamp(study: optuna.Study, trial: optuna.Trial | FrozenTrial, extra: dict[str, Any] | None = None) -> None:
    """Mark a freshly claimed trial as this process's, with its first beat, in one commit."""
    set_attrs(study, trial, user={WORKER: worker_name(), **(extra or {})}, system={PROCESS: identity(), BEAT: 0})


def note_stopped(study_dir: Path, pids: Iterable[int], reason: str) -> None:
    """Processes (this one, its slots) that stop while the storage cannot be reached leave the reason
    their RUNNING trials should fail with, for the process that later finds them dead (``stop_note``)."""
    with contextlib.suppress(OSError):  # a note is a better reason, never a reason to fail
        (study_dir / STOPPED).mkdir(parents=True, exist_ok=True)
        for pid in pids:
            who = identity(pid)
            _note_path(study_dir, who).write_text(json.dumps({"process": who, "reason": reason}))


def stop_note(study_dir: Path | None, who: Any) -> str | None:
    """The reason the process ``who`` (a trial's PROCESS) noted when it stopped, if it noted one."""
    if study_dir is None or not isinstance(who, dict):
        return None
    try:
        note = json.loads(_note_path(study_dir, who).read_text())
    except (OSError, ValueError):
        return None
    # the same host, boot, pid and start time: not another process that got the pid later
    if isinstance(note, dict) and note.get("process") == who and isinstance(note.get("reason"), str):
        return str(note["reason"])
    return None


def _note_path(study_dir: Path, who: dict[str, Any]) -> Path:
    name = re.sub(r"[^\w.-]", "_", f"{who.get('host')}-{who.get('pid')}")
    return study_dir / STOPPED / f"{name}.json"


class Heartbeat:
    """Raises the beat counter of each trial it holds every heartbeat interval while they run, so others can
    tell they live: one trial (a claim loop's) or every trial a Ray driver asked for (``add``/``drop``)."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial | None = None, interval: float | None = None):
        self.storage = storage_of(study)
        self.interval = intervals()[0] if interval is None else interval
        self.beats: dict[int, int] = {}  # trial id -> beats sent
        self.lock = threading.Lock()
        if trial is not None:
            self.add(trial_id(trial))
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True, name="heartbeat")
        self.thread.start()

    def add(self, tid: int) -> None:
        with self.lock:
            self.beats.setdefault(tid, 0)

    def drop(self, tid: int) -> None:
        with self.lock:
            self.beats.pop(tid, None)

    def _beat(self) -> None:
        while not self.done.wait(self.interval):
            with self.lock:
                for tid in self.beats:
                    self.beats[tid] += 1
                beats = dict(self.beats)
            for tid, count in beats.items():
                # a storage hiccup must not end the trial; past the outage limit the trial's own next write says so.
                # A trial that ended meanwhile refuses the write (UpdateFinishedTrialError): fine.
                with contextlib.suppress(Exception, StorageUnreachable):
                    self.storage.set_trial_system_attr(tid, BEAT, count)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


# ---------------------------------------------------------------------------- deciding


@dataclass
class Dead:
    trial: FrozenTrial
    reason: str


@dataclass
class Observer:
    """Watches the beats of RUNNING trials over time; ``clock`` is injectable for tests."""

    grace: float = field(default_factory=lambda: intervals()[1])
    clock: Callable[[], float] = time.monotonic
    seen: dict[int, tuple[Any, float]] = field(default_factory=dict)  # trial number -> (beat, when this process first saw it)
    outage_seen: float = 0.0  # OUTAGE.recovered when this observer last looked
    study_dir: Path | None = None  # where processes that stopped in an outage left their reason (note_stopped)

    def judge(self, running: list[FrozenTrial]) -> tuple[list[Dead], list[FrozenTrial]]:
        """(dead trials with their reason, trials not decided yet). Alive trials are in neither list."""
        now = self.clock()
        if OUTAGE.recovered != self.outage_seen:
            # an outage ended since the last look: nobody could write a beat during it, so a beat that
            # did not move then says nothing. Watch every trial anew, a full grace period from now.
            self.outage_seen = OUTAGE.recovered
            self.seen.clear()
        dead: list[Dead] = []
        undecided: list[FrozenTrial] = []
        for t in running:
            who = t.system_attrs.get(PROCESS)
            verdict = local_verdict(who)
            if verdict is False and isinstance(who, dict):  # local_verdict says False only for a local identity
                dead.append(Dead(t, stop_note(self.study_dir, who) or pid_gone(who["pid"], HOST)))
                continue
            beat = t.system_attrs.get(BEAT)
            first = self.seen.get(t.number)
            if first is None or first[0] != beat:  # first sight, or the beat moved: watch from now
                self.seen[t.number] = (beat, now)
                if first is None and verdict is None:
                    undecided.append(t)  # alive only once this process sees the beat move
            elif verdict is None:
                if now - first[1] >= self.grace:
                    dead.append(Dead(t, stop_note(self.study_dir, who) or no_heartbeat(self.grace)))
                else:
                    undecided.append(t)
        running_numbers = {t.number for t in running}
        for number in list(self.seen):
            if number not in running_numbers:
                del self.seen[number]
        return dead, undecided


def running(study: optuna.Study) -> list[FrozenTrial]:
    """RUNNING trials, filtered by the database (Optuna's study.get_trials reads every unfinished trial first)."""
    return storage_of(study).get_all_trials(study_id(study), deepcopy=False, states=(TrialState.RUNNING,))


def bury(study: optuna.Study, dead: list[Dead]) -> list[Dead]:
    """Fail each dead trial with its reason and queue its config again; the ones this call ended.
    A Ctrl-C meanwhile waits: a trial failed and not queued would lose its config's retry."""
    ended = []
    for d in dead:
        with atomic():  # one commit on hpsearch's storage (end_trial's then); two writes on another storage
            if end_trial(study, d.trial, TrialState.FAIL, d.reason, then=retry_of(d.trial)):
                ended.append(d)
    return ended


def retry_of(trial: FrozenTrial) -> FrozenTrial | None:
    """The trial's params as a WAITING trial (the next one claimed); None past MAX_RETRY retries of its config."""
    retries = int(trial.system_attrs.get("hpsearch:retries", 0))
    if retries >= MAX_RETRY:
        return None
    kept = {k: v for k, v in trial.user_attrs.items() if k in ("config", "warm_start", *RERUN_KEYS)}
    return optuna.trial.create_trial(
        state=TrialState.WAITING,
        params=trial.params,
        distributions=trial.distributions,
        user_attrs={**kept, "retry_of": trial.number},
        system_attrs={"hpsearch:retries": retries + 1},
    )


def fail_trials_of(study: optuna.Study, worker: str, reason: str, retry_them: bool) -> list[int]:
    """A process known to be dead (a slot that exited) cannot end its trials: end them now. Their numbers."""
    mine = [t for t in running(study) if t.user_attrs.get(WORKER) == worker]
    if retry_them:
        return [d.trial.number for d in bury(study, [Dead(t, reason) for t in mine])]
    return [t.number for t in mine if end_trial(study, t, TrialState.FAIL, reason)]


def check(study: optuna.Study, observer: Observer) -> list[Dead]:
    """One look: bury what is dead by now. Called before every claim, so any worker notices."""
    dead, _ = observer.judge(running(study))
    return bury(study, dead)


def settle(study: optuna.Study, observer: Observer, say: Callable[[str], None], sleep: Callable[[float], None] = time.sleep) -> list[Dead]:
    """On resume: decide every RUNNING trial now, so a dead one's retry is the next trial.

    Trials of dead local processes are decided at once; others are watched until their beat
    moves (alive) or a full grace period passes without a move (dead)."""
    dead, undecided = observer.judge(running(study))
    if undecided:
        numbers = ", ".join(str(t.number) for t in undecided)
        say(f"trial(s) {numbers} RUNNING elsewhere: watching their heartbeats (up to {observer.grace:g} s) before starting")
    while undecided:
        sleep(min(1.0, observer.grace / 4))
        more, undecided = observer.judge(running(study))
        dead += more
    ended = bury(study, dead)
    if ended:
        reasons = "; ".join(f"trial {d.trial.number} {d.reason}" for d in ended)
        say(f"{reasons}: config{'s' if len(ended) > 1 else ''} retried next")
    return ended
