"""Trial slots: several trials at once, each in a long-lived process bound to its own devices.

A *worker* runs trials of one study until the study's budget is spent. ``hpsearch worker``
is one worker on any machine; ``hpsearch run --workers N`` (or ``resources.workers``, or
several GPUs) starts N *slots* here: each slot is a subprocess running the very same worker
loop, with its own ``CUDA_VISIBLE_DEVICES`` and thread count. The parent only spawns,
watches and replaces slots, relays their per-epoch lines and reads progress from storage.

Budget exactness. Optuna's MaxTrialsCallback counts after the fact, so N processes overshoot
by up to N-1 trials; "ask, then fail the trial when over budget" leaves junk FAIL trials.
Here a worker *claims* a trial under a lock that every process on the study shares (a
PostgreSQL advisory lock, or a file lock next to a SQLite file): it counts running +
completed + pruned trials and calls ``study.ask()`` only while that count is below
``budget.trials``, all under the lock. A failed trial releases its claim (failures do not
spend the budget). So completed + pruned can never pass the budget, no trial is created only
to be thrown away, and a worker with nothing left to claim waits while the last trials run
(one of them might still fail and need a replacement) and exits when completed + pruned
reaches the budget.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from glob import glob
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.backends.optuna import (
    FINISHED,
    Summary,
    TrialFailed,
    announce as announce_start,
    best_text,
    open_study,
    settle_silent,
    trial_function,
    trial_value_text,
)
from hpsearch.errors import SpecError, UserError
from hpsearch.objective import load_objective
from hpsearch.progress import Progress
from hpsearch.spec import Resources, Spec, parse_space, validate_schema
from hpsearch.storage import (
    HEARTBEAT_S,
    cannot_open,
    open_storage,
    engine_url,
    fail_and_retry,
    redact,
    sqlite_path,
)

FAKE_GPUS_ENV = "HPSEARCH_FAKE_GPUS"  # pretend this many GPUs exist (tests, dry runs on a laptop)
SPEC_ENV = "HPSEARCH_SLOT_SPEC"  # the parent's resolved spec, as JSON, for its slots
DEADLINE_ENV = "HPSEARCH_DEADLINE"  # unix time after which slots claim no new trial (budget.timeout)
THREADS_ENV = "HPSEARCH_THREADS"
CLAIMED = (TrialState.RUNNING, *FINISHED)  # trials that hold a share of the budget
WAIT_S = 1.0  # a worker with nothing to claim looks again this often (a running trial may fail)
POLL_S = 0.5  # the parent reads progress from storage this often
STOPPED = 3  # a slot's exit status when budget.max_failures stopped it
CRASH_LIMIT = 3  # a slot that dies this often in a row without finishing a trial is not restarted
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"


# ---------------------------------------------------------------------------- devices & slots


@dataclass(frozen=True)
class Slot:
    index: int
    devices: tuple[str, ...] | None  # CUDA_VISIBLE_DEVICES of the slot; () hides all GPUs, None inherits
    threads: int  # CPU threads for one trial (OMP_NUM_THREADS, torch.set_num_threads)

    def env(self) -> dict[str, str]:
        env = {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads), THREADS_ENV: str(self.threads)}
        if self.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.devices)
        return env

    def label(self) -> str:
        where = f"GPU {','.join(self.devices)}" if self.devices else "CPU"
        return f"slot {self.index}: {where}, {self.threads} thread{'s' if self.threads > 1 else ''}"


def visible_gpus() -> list[str]:
    """Device ids a slot may name in CUDA_VISIBLE_DEVICES, in index order."""
    fake = os.environ.get(FAKE_GPUS_ENV)
    if fake is not None:
        if not fake.strip().isdigit():
            raise UserError(f"{FAKE_GPUS_ENV}={fake!r}: expected a number of GPUs")
        return [str(i) for i in range(int(fake))]
    if not (glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")):
        return []  # no GPU driver: do not pay for importing torch
    import torch

    n = torch.cuda.device_count()
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:n] if len(listed) >= n else [str(i) for i in range(n)]


def cpu_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def plan_slots(resources: Resources, gpus: list[str], cores: int) -> list[Slot]:
    """Slots and their devices: GPU groups are handed out round-robin, so devices fill before they are shared."""
    r = resources
    chosen = gpus if r.gpus is None else pick_gpus(r.gpus, gpus)
    if not chosen or r.gpus_per_trial == 0:
        n = r.workers or 1
        devices = () if gpus else None  # CPU-only trials on a GPU machine must not touch the GPUs
        return [Slot(i, devices, threads_per_slot(r, cores, n)) for i in range(n)]
    per_trial = max(1, int(r.gpus_per_trial))
    share = r.trials_per_gpu if r.gpus_per_trial >= 1 else int(1 / r.gpus_per_trial + 1e-9)
    groups = [tuple(chosen[i : i + per_trial]) for i in range(0, len(chosen) - per_trial + 1, per_trial)]
    if not groups:
        raise UserError(f"resources.gpus_per_trial={per_trial} but only {len(chosen)} GPU(s) to use")
    capacity = len(groups) * share
    n = r.workers or capacity
    if n > capacity:
        raise UserError(
            f"resources.workers={n} needs {n} GPU shares, but {len(chosen)} GPU(s) with {per_trial} per trial and "
            f"{share} trial(s) per GPU give {capacity}; lower --workers or raise resources.trials_per_gpu"
        )
    return [Slot(i, groups[i % len(groups)], threads_per_slot(r, cores, n)) for i in range(n)]


def pick_gpus(indices: list[int], gpus: list[str]) -> list[str]:
    missing = [i for i in indices if i >= len(gpus)]
    if missing:
        raise UserError(f"resources.gpus: no GPU {missing[0]} on this machine ({len(gpus)} visible: {list(range(len(gpus)))})")
    return [gpus[i] for i in indices]


def threads_per_slot(r: Resources, cores: int, slots: int) -> int:
    return max(1, int(r.cpus_per_trial)) if r.cpus_per_trial else max(1, cores // slots)


def slots_for(spec: Spec) -> list[Slot]:
    return plan_slots(spec.resources, visible_gpus(), cpu_cores())


def in_process(slots: list[Slot], spec: Spec) -> bool:
    """One slot that needs no device binding runs in this process, as a plain ``hpsearch run`` does."""
    return len(slots) == 1 and spec.resources.gpus is None and slots[0].devices != ()


# ---------------------------------------------------------------------------- the claim


class ClaimLock:
    """Makes "count the claimed trials, then create one" atomic across every process on a study."""

    def __init__(self, url: str, study: str):
        self.url, self.study = url, study
        self.path = sqlite_path(url)
        self.dialect = url.split(":", 1)[0].split("+", 1)[0]
        if self.path is None and self.dialect not in ("postgresql", "postgres"):
            raise UserError(f"storage: cannot open {redact(url)}: hpsearch stores studies in sqlite:///PATH or postgresql://USER:PW@HOST/DB")
        self._engine: Any = None
        # PostgreSQL advisory locks take a 64-bit key; one per study name.
        self.key = int.from_bytes(hashlib.blake2b(f"hpsearch:{study}".encode(), digest_size=8).digest(), "big", signed=True)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if self.path is not None:
            with self._file_lock():
                yield
        else:
            with self._advisory_lock():
                yield

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        import fcntl

        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.path}.claims.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released by the kernel if this process dies
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _advisory_lock(self) -> Iterator[None]:
        import sqlalchemy

        if self._engine is None:
            self._engine = sqlalchemy.create_engine(engine_url(self.url), pool_size=1, pool_pre_ping=True)
        try:
            connection = self._engine.connect()
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise cannot_open(self.url, exc) from None
        with connection as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": self.key})  # released if the connection drops
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})


def claim(study: optuna.Study, budget: int, lock: ClaimLock) -> optuna.Trial | None:
    """A new RUNNING trial of this worker, or None while running + finished trials cover the budget."""
    with lock.held(), warnings.catch_warnings():
        # Optuna warns that heartbeats are meant for study.optimize; this loop beats itself (Heartbeat).
        warnings.filterwarnings("ignore", message="Heartbeat of storage")
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)  # a silent worker's trial is failed (and retried) here
        if len(study.get_trials(deepcopy=False, states=CLAIMED)) >= budget:
            return None
        trial = study.ask()
        study._storage.record_heartbeat(trial._trial_id)
        trial.set_user_attr("worker", WORKER_ID)
    return trial


def finished_count(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


class Heartbeat:
    """Tells the storage this trial's process is alive, so other workers can tell a dead one."""

    def __init__(self, storage: Any, trial_id: int):
        self.storage, self.trial_id = storage, trial_id
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        while not self.done.wait(HEARTBEAT_S):
            with contextlib.suppress(Exception):  # a storage hiccup must not end the trial
                self.storage.record_heartbeat(self.trial_id)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


# ---------------------------------------------------------------------------- one worker


@dataclass
class WorkState:
    stop_requested: bool = False  # set by SIGUSR1: finish the running trial, claim no more


STATE = WorkState()


def work(spec: Spec, quiet: bool = False, announce: bool = True, deadline: float | None = None, seed_salt: int = 0) -> Summary:
    """Claim and run trials until completed + pruned reaches ``budget.trials`` (or time, failures, a stop).

    ``announce``: print the first line and each trial's end (a slot leaves that to its parent).
    ``seed_salt``: shifts the sampler seed, so processes sharing a study draw different samples."""
    objective = load_objective(spec.objective, spec.base_dir)
    apply_threads()
    STATE.stop_requested = False  # a previous study in this process may have stopped
    open_storage(spec.storage_url)  # reach the storage before the lock writes beside it: a bad URL is one line, nothing written
    lock = ClaimLock(spec.storage_url, spec.study)
    with lock.held():  # creating the study under the lock enqueues warm starts once
        study = open_study(spec, seed_salt=seed_salt)
    spec.study_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(spec.study, spec.budget.trials, quiet=quiet)
    if announce:
        settle_silent(study, progress)  # a killed earlier run's trial: failed with a reason, its config queued first
    refresh(progress, study, spec)
    if announce and not announce_start(progress, spec, progress.counts.done):
        return summary(study, spec, 0, None)
    fn = trial_function(spec, objective, progress)
    ran, failures_in_a_row, stopped_early = 0, 0, None
    limit = spec.budget.max_failures
    with progress:
        try:
            while not STATE.stop_requested and (deadline is None or time.time() < deadline):
                trial = claim(study, spec.budget.trials, lock)
                if trial is None:
                    if finished_count(study) >= spec.budget.trials:
                        break
                    time.sleep(WAIT_S)
                    continue
                ran += 1
                progress.counts.running += 1  # this process's trial; the next refresh reads them all from storage
                progress.refresh()
                frozen = run_claimed(study, trial, fn)
                failures_in_a_row = failures_in_a_row + 1 if frozen.state == TrialState.FAIL else 0
                if announce:
                    refresh(progress, study, spec)
                    reason = frozen.user_attrs.get("reason", frozen.state.name.lower())
                    progress.trial(frozen.number, reason, trial_value_text(frozen, spec), frozen.params)
                if limit is not None and failures_in_a_row >= limit:
                    stopped_early = f"{failures_in_a_row} trials failed in a row (budget.max_failures={limit}); last: {frozen.user_attrs.get('reason')}"
                    break
        except KeyboardInterrupt:  # also a claim cut short between ask() and the objective
            fail_trials_of(study, WORKER_ID, "interrupted", retry=False)
            raise
    return summary(study, spec, ran, stopped_early)


def run_claimed(study: optuna.Study, trial: optuna.Trial, fn: Any) -> FrozenTrial:
    """Run one claimed trial and record its end state, exactly as study.optimize would."""
    beat = Heartbeat(study._storage, trial._trial_id)
    values, state = None, TrialState.COMPLETE
    try:
        try:
            values = fn(trial)
        except optuna.TrialPruned:
            state = TrialState.PRUNED
        except TrialFailed:
            state = TrialState.FAIL
        except KeyboardInterrupt:
            tell(study, trial, TrialState.FAIL)
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. a storage error while sampling: the trial fails, the worker goes on
            trial.set_user_attr("reason", f"failed: {type(exc).__name__}: {exc}".strip())
            state = TrialState.FAIL
        tell(study, trial, state, values)
    finally:
        beat.stop()
    return study._storage.get_trial(trial._trial_id)


def tell(study: optuna.Study, trial: optuna.Trial, state: TrialState, values: Any = None) -> None:
    """study.tell outside study.optimize. A sampler that asks the study to stop there (GridSampler,
    once every grid point ran) raises instead; the trial is recorded by then, so stop claiming."""
    try:
        study.tell(trial, values, state=state)
    except RuntimeError as exc:
        if "Study.stop" not in str(exc):
            raise
        STATE.stop_requested = True


def apply_threads() -> None:
    """Slots get OMP_NUM_THREADS before torch loads; this also covers a torch that was imported already."""
    threads = os.environ.get(THREADS_ENV)
    if threads and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))


def refresh(progress: Progress, study: optuna.Study, spec: Spec) -> list[FrozenTrial]:
    trials = study.get_trials(deepcopy=False)
    c = progress.counts
    c.done = sum(t.state in FINISHED for t in trials)
    c.pruned = sum(t.state == TrialState.PRUNED for t in trials)
    c.failed = sum(t.state == TrialState.FAIL for t in trials)
    c.running = sum(t.state == TrialState.RUNNING for t in trials)
    c.best = best_text(study, spec)
    progress.refresh()
    return trials


def summary(study: optuna.Study, spec: Spec, ran: int, stopped_early: str | None) -> Summary:
    trials = study.get_trials(deepcopy=False)
    pruned = sum(t.state == TrialState.PRUNED for t in trials)
    failed = sum(t.state == TrialState.FAIL for t in trials)
    finished = sum(t.state in FINISHED for t in trials)
    return Summary(spec.study, redact(spec.storage_url), finished, pruned, failed, ran, best_text(study, spec), stopped_early)


# ---------------------------------------------------------------------------- slots: the parent


def run_worker(spec: Spec, quiet: bool = False, seed_salt: int = 0) -> Summary:
    """``hpsearch run`` / ``hpsearch worker``: work on the study with this machine's slots, in this
    process when there is one slot."""
    slots = slots_for(spec)
    if in_process(slots, spec):
        deadline = time.time() + spec.budget.timeout if spec.budget.timeout else None
        return work(spec, quiet=quiet, deadline=deadline, seed_salt=seed_salt)
    return run_slots(spec, slots, quiet)


def machine_salt() -> int:
    """``hpsearch worker`` on several machines: a seed shift of its own for each process."""
    return int(hashlib.sha256(WORKER_ID.encode()).hexdigest()[:6], 16)


@dataclass
class SlotProcess:
    slot: Slot
    proc: subprocess.Popen[str]
    crashes_in_a_row: int = 0
    last_line: str = ""
    worker: str = ""  # WORKER_ID of the process, as its trials record it

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass
class Pool:
    """The parent's slot processes: start, relay output, notice deaths, replace, stop."""

    spec: Spec
    quiet: bool
    deadline: float | None
    lines: queue.Queue[tuple[int, str]] = field(default_factory=queue.Queue)
    live: dict[int, SlotProcess] = field(default_factory=dict)
    workers: set[str] = field(default_factory=set)  # every slot process this run started

    def start(self, slot: Slot, crashes_in_a_row: int = 0) -> None:
        env = {**os.environ, **slot.env(), SPEC_ENV: json.dumps(self.spec.model_dump(mode="json")), "PYTHONUNBUFFERED": "1"}
        env.pop(FAKE_GPUS_ENV, None)
        if self.deadline is not None:
            env[DEADLINE_ENV] = repr(self.deadline)
        cmd = [sys.executable, "-m", "hpsearch.workers", "--slot", str(slot.index), "--parent", str(os.getpid()), "--path", self.spec.path]
        if self.quiet:
            cmd.append("--quiet")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        entry = SlotProcess(slot, proc, crashes_in_a_row, worker=f"{socket.gethostname()}:{proc.pid}")
        self.live[slot.index] = entry
        self.workers.add(entry.worker)
        threading.Thread(target=self._relay, args=(entry,), daemon=True).start()

    def _relay(self, entry: SlotProcess) -> None:
        assert entry.proc.stdout is not None
        for line in entry.proc.stdout:
            if line.strip():
                entry.last_line = line.strip()
                self.lines.put((entry.slot.index, line.rstrip()))

    def drain(self) -> list[str]:
        out = []
        while True:
            try:
                index, line = self.lines.get_nowait()
            except queue.Empty:
                return out
            out.append(f"  [slot {index}] {line.strip()}")

    def ended(self) -> list[SlotProcess]:
        gone = [e for e in self.live.values() if e.proc.poll() is not None]
        for e in gone:
            del self.live[e.slot.index]
        return gone

    def signal_all(self, sig: int) -> None:
        for e in self.live.values():
            with contextlib.suppress(ProcessLookupError):
                e.proc.send_signal(sig)

    def wait_all(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for e in list(self.live.values()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                e.proc.wait(max(0.0, end - time.monotonic()))
            if e.proc.poll() is None:
                e.proc.kill()
                e.proc.wait()


def run_slots(spec: Spec, slots: list[Slot], quiet: bool = False) -> Summary:
    """Start one process per slot and keep them going until the study's budget is spent."""
    lock = ClaimLock(spec.storage_url, spec.study)
    with lock.held():
        study = open_study(spec)
    spec.study_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(spec.study, spec.budget.trials, quiet=quiet)
    trials = refresh(progress, study, spec)
    done = progress.counts.done
    if not announce_start(progress, spec, done, f" in {len(slots)} slots"):
        return summary(study, spec, 0, None)
    for slot in slots:
        progress.print(f"  {slot.label()}")
    deadline = time.time() + spec.budget.timeout if spec.budget.timeout else None
    pool = Pool(spec, quiet, deadline)
    watch = Watch(study, spec, progress, pool, {t.number for t in trials if t.state.is_finished()})
    with progress:
        try:
            for slot in slots:
                pool.start(slot)
            watch.loop()
        except KeyboardInterrupt:
            pool.signal_all(signal.SIGINT)  # slots mark their running trials "interrupted"
            pool.wait_all(timeout=15)
            watch.bury(pool.ended(), "interrupted")
            raise
        finally:
            pool.signal_all(signal.SIGTERM)
            pool.wait_all(timeout=15)
    ran = sum(t.user_attrs.get("worker") in pool.workers for t in study.get_trials(deepcopy=False))
    return summary(study, spec, ran, watch.stopped_early)


@dataclass
class Watch:
    """The parent's loop: relay lines, report finished trials, replace dead slots, stop on failures."""

    study: optuna.Study
    spec: Spec
    progress: Progress
    pool: Pool
    seen: set[int]
    stopped_early: str | None = None
    stopping: bool = False

    def loop(self) -> None:
        while self.pool.live:
            for line in self.pool.drain():
                self.progress.print(line)
            self.bury(self.pool.ended())
            self.report(refresh(self.progress, self.study, self.spec))
            time.sleep(POLL_S)
        for line in self.pool.drain():
            self.progress.print(line)
        self.report(refresh(self.progress, self.study, self.spec))

    def report(self, trials: list[FrozenTrial]) -> None:
        ended = sorted((t for t in trials if t.state.is_finished() and t.number not in self.seen), key=completed_at)
        for t in ended:
            self.seen.add(t.number)
            self.progress.trial(t.number, t.user_attrs.get("reason", t.state.name.lower()), trial_value_text(t, self.spec), t.params)
            if t.state != TrialState.FAIL:
                for e in self.pool.live.values():
                    if t.user_attrs.get("worker") == e.worker:
                        e.crashes_in_a_row = 0
        limit = self.spec.budget.max_failures
        if limit is not None and not self.stopping and failures_in_a_row(trials) >= limit:
            last = max((t for t in trials if t.state == TrialState.FAIL), key=completed_at)
            self.stop(f"{limit} trials failed in a row (budget.max_failures={limit}); last: {last.user_attrs.get('reason')}")

    def stop(self, why: str) -> None:
        """Let running trials finish; claim nothing new."""
        self.stopped_early, self.stopping = why, True
        self.pool.signal_all(signal.SIGUSR1)

    def bury(self, gone: list[SlotProcess], reason: str | None = None) -> None:
        for e in gone:
            rc = e.proc.returncode
            if rc == 0:
                continue
            if rc == STOPPED and not self.stopping:
                self.stop(f"slot {e.slot.index}: {e.last_line}")
                continue
            why = reason or crash_reason(rc, e.last_line)
            fail_trials_of(self.study, e.worker, why, retry=reason is None)
            if reason is not None or self.stopping:
                continue
            self.progress.print(f"slot {e.slot.index} (pid {e.pid}) ended: {why}")
            if finished_count(self.study) >= self.spec.budget.trials or (self.pool.deadline and time.time() >= self.pool.deadline):
                continue
            if e.crashes_in_a_row + 1 >= CRASH_LIMIT:
                self.progress.print(f"slot {e.slot.index} died {CRASH_LIMIT} times in a row without finishing a trial; not restarting it")
                if not self.pool.live:
                    self.stopped_early = f"every slot keeps dying; last: {why}"
                continue
            self.pool.start(e.slot, e.crashes_in_a_row + 1)
            self.progress.print(f"slot {e.slot.index} replaced by pid {self.pool.live[e.slot.index].pid}")


def crash_reason(rc: int, last_line: str) -> str:
    if rc < 0:
        name = signal.Signals(-rc).name
        return f"failed: slot process killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    return f"failed: slot process exited with status {rc}" + (f" ({last_line})" if last_line else "")


def fail_trials_of(study: optuna.Study, worker: str, reason: str, retry: bool) -> None:
    """A dead process cannot end its trial: do it now rather than after the heartbeat grace period.

    ``retry``: queue the config again (at most storage.MAX_RETRY times), as for any process that died.
    """
    storage = study._storage
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if t.user_attrs.get("worker") != worker:
            continue
        if retry:
            fail_and_retry(study, t._trial_id, reason)
            continue
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            storage.set_trial_user_attr(t._trial_id, "reason", reason)
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)


def completed_at(trial: FrozenTrial) -> datetime:
    return trial.datetime_complete or datetime.min


def failures_in_a_row(trials: list[FrozenTrial]) -> int:
    ended = sorted((t for t in trials if t.state.is_finished()), key=completed_at, reverse=True)
    n = 0
    for t in ended:
        if t.state != TrialState.FAIL:
            break
        n += 1
    return n


# ---------------------------------------------------------------------------- slots: the child


def spec_from_json(text: str, path: str) -> Spec:
    raw = json.loads(text)
    errors: list[str] = []
    spec = validate_schema(raw, errors)
    tree = parse_space(raw.get("space"), "space", errors)
    if errors or spec is None:
        raise SpecError([f"{path}: {e}" for e in errors])
    spec._path, spec._tree = path, tree
    return spec


def watch_parent(parent: int) -> None:
    """End with the parent: the kernel sends SIGTERM if it dies (Linux), and a slot never outlives it."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        raise SystemExit(1)


def interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def request_stop(signum: int, frame: Any) -> None:
    STATE.stop_requested = True


def main(argv: list[str] | None = None) -> int:
    """A slot: ``python -m hpsearch.workers --slot I --parent PID --path SPEC`` (started by run_slots)."""
    ap = argparse.ArgumentParser(prog="hpsearch-slot")
    ap.add_argument("--slot", type=int, required=True)
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    watch_parent(args.parent)
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGUSR1, request_stop)
    spec = spec_from_json(os.environ[SPEC_ENV], args.path)
    deadline = float(os.environ[DEADLINE_ENV]) if os.environ.get(DEADLINE_ENV) else None
    try:
        result = work(spec, quiet=args.quiet, announce=False, deadline=deadline, seed_salt=1_000_003 * (args.slot + 1))
    except KeyboardInterrupt:
        return 130
    if result.stopped_early:
        print(f"stopped: {result.stopped_early}", flush=True)
        return STOPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
