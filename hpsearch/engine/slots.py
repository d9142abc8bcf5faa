"""Several trials at once on this machine: one long-lived process per slot, each bound to its devices.

The parent starts the command it is given once per slot (adding ``--slot I --parent PID``),
with the slot's ``CUDA_VISIBLE_DEVICES`` and thread count, the resolved spec as JSON and the
deadline in the environment. It relays the slots' lines, reports finished trials from
storage, replaces a slot that died (its trial failed and retried at once: the parent saw the
death), and asks every slot to stop claiming when ``budget.max_failures`` says so.

With ``trials_per_gpu: auto`` it also follows packing.py's plan: it starts slots on a GPU when
the plan grows and asks the newest slots there to finish their trial and stop when it shrinks.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.base.cores import cpu_cores
from hpsearch.base.errors import SpecError, StorageUnreachable
from hpsearch.engine.devices import FAKE_GPUS_ENV, THREADS_ENV, Slot, gpu_memory, passive_waits, threads_notice, visible_gpus
from hpsearch.engine.packing import Packer
from hpsearch.study.claim import ClaimLock
from hpsearch.study.counts import CLAIMED, completed_at, failures_in_a_row, finished_count, own_counts, reason
from hpsearch.study.deaths import out_of_memory, slot_crash
from hpsearch.study.liveness import WORKER, fail_trials_of, note_stopped, worker_name
from hpsearch.study.open import open_study
from hpsearch.study.progress import Progress
from hpsearch.study.storage import disk_full
from hpsearch.study.summary import Summary, announce, refresh, summary, trial_value_text

if TYPE_CHECKING:
    from hpsearch.spec.loader import Spec

SPEC_ENV = "HPSEARCH_SLOT_SPEC"  # the parent's resolved spec, as JSON, for its slots
DEADLINE_ENV = "HPSEARCH_DEADLINE"  # unix time after which slots claim no new trial (budget.timeout)
STOPPED = 3  # a slot's exit status when budget.max_failures stopped it
DISK_FULL = 4  # a slot's exit status when the disk ran full: the parent says so, once, and stops the run
POLL_S = 0.5  # the parent reads progress from storage this often
STOP_WAIT_S = 2.0  # Ctrl-C/SIGTERM: slots get this long to record "interrupted" before SIGKILL (a stop takes < 3 s)
RELAY_WAIT_S = 5.0  # a slot that exited: wait this long at most for its last output (a child that kept the pipe open)
CRASH_LIMIT = 3  # a slot that dies this often in a row without finishing a trial is not restarted


def spec_from_env(path: str) -> Spec:
    """The slot's side of SPEC_ENV: the very spec the parent resolved (overrides applied)."""
    from hpsearch.search.space import parse_space
    from hpsearch.spec.loader import validate_schema

    raw = json.loads(os.environ[SPEC_ENV])
    errors: list[str] = []
    spec = validate_schema(raw, errors)
    tree = parse_space(raw.get("space"), "space", errors)
    if errors or spec is None:
        raise SpecError([f"{path}: {e}" for e in errors])
    spec._path, spec._tree = path, tree
    spec._threads_cap = int(os.environ[THREADS_ENV]) if os.environ.get(THREADS_ENV, "").isdigit() else None  # Slot.env
    return spec


def deadline_from_env() -> float | None:
    text = os.environ.get(DEADLINE_ENV)
    return float(text) if text else None


@dataclass
class SlotProcess:
    slot: Slot
    proc: subprocess.Popen[str]
    crashes_in_a_row: int = 0
    last_line: str = ""
    relay: threading.Thread | None = None  # reads its output; done once the process exited and its pipe is empty

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def worker(self) -> str:
        return worker_name(self.proc.pid)  # as its trials record it


@dataclass
class Pool:
    """The parent's slot processes: start, relay output, notice deaths, replace, stop."""

    spec: Spec
    command: list[str]  # the slot's program; --slot I --parent PID are added
    deadline: float | None
    lines: queue.Queue[tuple[int, str]] = field(default_factory=queue.Queue)
    live: dict[int, SlotProcess] = field(default_factory=dict)
    workers: set[str] = field(default_factory=set)  # every slot process this run started
    placed: dict[str, Slot] = field(default_factory=dict)  # worker -> its slot (packing: which GPU a trial ran on)

    def start(self, slot: Slot, crashes_in_a_row: int = 0) -> None:
        env = {**os.environ, **slot.env(), SPEC_ENV: json.dumps(self.spec.model_dump(mode="json")), "PYTHONUNBUFFERED": "1"}
        env.pop(FAKE_GPUS_ENV, None)
        passive_waits(env)
        if self.deadline is not None:
            env[DEADLINE_ENV] = repr(self.deadline)
        cmd = [*self.command, "--slot", str(slot.index), "--parent", str(os.getpid())]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        entry = SlotProcess(slot, proc, crashes_in_a_row)
        self.live[slot.index] = entry
        self.workers.add(entry.worker)
        self.placed[entry.worker] = slot
        entry.relay = threading.Thread(target=self._relay, args=(entry,), daemon=True)
        entry.relay.start()

    def _relay(self, entry: SlotProcess) -> None:
        assert entry.proc.stdout is not None
        for line in entry.proc.stdout:
            if line.strip():
                entry.last_line = line.strip()
                self.lines.put((entry.slot.index, line.rstrip()))

    def drain(self) -> list[str]:
        out: list[str] = []
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
            if e.relay is not None:  # its last lines (the last trial's, a stop reason) are read before it counts as gone
                e.relay.join(timeout=RELAY_WAIT_S)
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


def run_slots(spec: Spec, slots: list[Slot], command: list[str], quiet: bool = False) -> Summary:
    """Start ``command`` once per slot and keep the slots going until the study's budget is spent."""
    packer, packing_note = packer_for(spec, slots)  # before anything is written: a bad fake probe is one line
    lock = ClaimLock(spec.storage_url, spec.study, spec.storage.outage_s)
    with lock.held():  # creating the study under the lock enqueues warm starts once
        study = open_study(spec)
    spec.study_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(spec.study, spec.budget.trials, quiet=quiet)
    refresh(progress, study, spec)
    if not announce(progress, spec, progress.counts.done, f" in {len(slots)} slots"):
        return summary(study, spec, 0, None)
    for slot in slots:
        progress.print(f"  {slot.label()}")
    notice = threads_notice(spec.fixed, slots, cpu_cores())
    if notice:
        progress.print(f"  {notice}")
    for line in [packing_note] if packing_note else packer.lines() if packer else []:
        progress.print(f"  plan: {line}")
    deadline = time.time() + spec.budget.timeout if spec.budget.timeout else None
    pool = Pool(spec, command + (["--quiet"] if quiet else []), deadline)
    seen = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
    watch = Watch(study, spec, progress, pool, seen, packer=packer, next_index=len(slots), lock=lock)
    with progress:
        try:
            for slot in slots:
                pool.start(slot)
            watch.loop()
        except KeyboardInterrupt:
            # SIGTERM, not SIGINT: a slot still importing inherited the parent's disposition, and
            # `cmd &` starts the parent with SIGINT ignored; SIGTERM's default ends a slot at once
            pool.signal_all(signal.SIGTERM)  # slots mark their running trials "interrupted" and queue them again
            pool.wait_all(timeout=STOP_WAIT_S)  # then SIGKILL: the parent buries what they left RUNNING
            watch.bury(pool.ended(), "interrupted")
            raise
        except StorageUnreachable as exc:  # the slots are stopped below with their trials RUNNING: note why
            note_stopped(spec.study_dir, [e.pid for e in pool.live.values()], exc.reason)
            raise
        finally:
            pool.signal_all(signal.SIGTERM)
            pool.wait_all(timeout=STOP_WAIT_S)
    ran = sum(t.user_attrs.get(WORKER) in pool.workers for t in study.get_trials(deepcopy=False))
    return summary(study, spec, ran, watch.stopped_early)


@dataclass
class Watch:
    """The parent's loop: relay lines, report finished trials, replace dead slots, stop on failures."""

    study: optuna.Study
    spec: Spec
    progress: Progress
    pool: Pool
    seen: set[int]
    lock: ClaimLock  # the study's claim lock: a dead slot's trial is failed and queued under it
    stopped_early: str | None = None
    stopping: bool = False
    packer: Packer | None = None  # trials_per_gpu: auto
    next_index: int = 0  # the index a slot started for the plan gets
    retiring: set[int] = field(default_factory=set)  # slots asked to stop for the plan: not replaced, not counted
    packed: set[int] = field(default_factory=set)  # trials the packer has seen finish
    sized: set[int] = field(default_factory=set)  # trials whose config size the packer has seen
    crashed: int = 0  # slot processes that died (not a clean exit, a max_failures stop or a retired slot)

    def loop(self) -> None:
        while self.pool.live:
            self.tick()
            time.sleep(POLL_S)
        self.tick()

    def tick(self) -> None:
        for line in self.pool.drain():
            self.progress.print(line)
        gone = self.pool.ended()
        self.crashed += sum(e.proc.returncode not in (0, STOPPED) and e.slot.index not in self.retiring for e in gone)
        try:
            self._look(gone)
        except Exception as exc:
            if not disk_full(exc):  # the parent's own write (ending a dead slot's trials) may be the one that finds it
                raise
            self.stop_disk_full()

    def _look(self, gone: list[SlotProcess]) -> None:
        self.bury(gone)
        refresh(self.progress, self.study, self.spec)
        trials = self.study.get_trials(deepcopy=False)
        self.report(trials)
        if self.packer is not None:
            self.repack(trials)

    def report(self, trials: list[FrozenTrial]) -> None:
        ended = sorted((t for t in trials if t.state.is_finished() and t.number not in self.seen), key=completed_at)
        for t in ended:
            self.seen.add(t.number)
            self.progress.trial(t.number, reason(t), trial_value_text(t, self.spec), t.params)
            if t.state != TrialState.FAIL:
                for e in self.pool.live.values():
                    if t.user_attrs.get(WORKER) == e.worker:
                        e.crashes_in_a_row = 0
        limit = self.spec.budget.max_failures
        if limit is not None and not self.stopping and failures_in_a_row(trials) >= limit:
            last = max((t for t in trials if t.state == TrialState.FAIL), key=completed_at)
            self.stop(f"{limit} trials failed in a row (budget.max_failures={limit}); last: {last.user_attrs.get('reason')}")

    def stop(self, why: str) -> None:
        """Let running trials finish; claim nothing new."""
        self.stopped_early, self.stopping = why, True
        self.pool.signal_all(signal.SIGUSR1)

    def bury(self, gone: list[SlotProcess], why: str | None = None) -> None:
        for e in gone:
            rc = e.proc.returncode
            if rc == 0:
                continue
            if rc == DISK_FULL:
                self.disk_full(e)
                continue
            if rc == STOPPED and not self.stopping:
                self.stop(f"slot {e.slot.index}: {e.last_line}")
                continue
            text = why or slot_crash(rc, e.last_line)
            # Under the claim lock: a slot claiming between the fail and the queued retry would see
            # neither, sample a new config and spend the budget the retry was owed.
            with self.lock.held():
                fail_trials_of(self.study, e.worker, text, retry_them=True)
            if why is not None or self.stopping or e.slot.index in self.retiring:
                continue
            self.progress.print(f"slot {e.slot.index} (pid {e.pid}) ended: {text}")
            if finished_count(self.study) >= self.spec.budget.trials or (self.pool.deadline and time.time() >= self.pool.deadline):
                continue
            if e.crashes_in_a_row + 1 >= CRASH_LIMIT:
                self.progress.print(f"slot {e.slot.index} died {CRASH_LIMIT} times in a row without finishing a trial; not restarting it")
                if not self.pool.live:
                    self.stopped_early = f"every slot keeps dying; last: {text}"
                continue
            self.pool.start(e.slot, e.crashes_in_a_row + 1)
            self.progress.print(f"slot {e.slot.index} replaced by pid {self.pool.live[e.slot.index].pid}")

    def stop_disk_full(self) -> None:
        """Stop the run with the disk-full line, unless it is stopping already."""
        if not self.stopping:
            self.stop(f"the disk is full (no space left on the device of {self.spec.study_dir} or the study's storage); free some space")

    def disk_full(self, e: SlotProcess) -> None:
        """No slot can record anything more: stop them all, end what this one left RUNNING if the
        database still takes that one write (its next run fails it at once otherwise: the pid is gone)."""
        self.stop_disk_full()
        with contextlib.suppress(Exception):
            fail_trials_of(self.study, e.worker, "failed: disk full", retry_them=True)

    # ------------------------------------------------------------------------ trials_per_gpu: auto

    def repack(self, trials: list[FrozenTrial]) -> None:
        """Feed this run's trials to the packer (sizes as claimed, peaks and out-of-memory retries as
        they finish); on a new plan, start or retire slots to match it."""
        assert self.packer is not None
        for t in trials:
            worker = t.user_attrs.get(WORKER)
            if worker not in self.pool.workers:
                continue  # another run's or machine's trial: its peak may not be this GPU's (or a CPU's RSS)
            if t.number not in self.sized and ("config" in t.user_attrs or t.state.is_finished()):  # stamped once sampled
                self.sized.add(t.number)
                self.packer.seen(claimed_config(self.spec, t))
            if t.state.is_finished() and t.number not in self.packed:
                self.packed.add(t.number)
                self.packer.measured(t.user_attrs.get("peak_mem_mb"), t.user_attrs.get("config") or {})
                devices = self.pool.placed[worker].devices
                if out_of_memory(t.user_attrs) and devices:
                    self.packer.out_of_memory(devices[0], len(self.on_gpu(devices[0])))
        if self.packer.update() is not None:
            for line in self.packer.lines():
                self.progress.print(f"plan: {line}")
        if self.stopping or self.crashed or (self.pool.deadline and time.time() >= self.pool.deadline):
            return  # after a slot process died, auto adds no slots: the death may have been memory
        busy = {t.user_attrs.get(WORKER) for t in trials if t.state == TrialState.RUNNING}
        idle = sum(e.worker not in busy for e in self.pool.live.values() if e.slot.index not in self.retiring)
        n = own_counts(self.study)
        spare = self.spec.budget.trials - sum(n.get(s, 0) for s in CLAIMED) - idle  # unclaimed trials no idle slot will take
        for gpu in self.packer.names:
            spare -= self.follow(gpu, self.packer.wanted(gpu), max(0, spare))

    def on_gpu(self, gpu: str) -> list[SlotProcess]:
        return [e for e in self.pool.live.values() if e.slot.devices == (gpu,) and e.slot.index not in self.retiring]

    def follow(self, gpu: str, wanted: int, spare: int) -> int:
        """Retire the newest slots on ``gpu`` beyond ``wanted``, or start up to ``spare`` new ones; how many started."""
        slots = sorted(self.on_gpu(gpu), key=lambda e: e.slot.index)
        for e in slots[wanted:]:  # the newest first: they ran the fewest trials
            self.retiring.add(e.slot.index)
            with contextlib.suppress(ProcessLookupError):
                e.proc.send_signal(signal.SIGUSR1)
            self.progress.print(f"slot {e.slot.index} (GPU {gpu}) finishes its trial and stops: the plan has {wanted} there")
        started = max(0, min(wanted - len(slots), spare))
        for _ in range(started):
            slot = Slot(self.next_index, (gpu,), next(iter(self.pool.placed.values())).threads)  # the plan's share
            self.next_index += 1
            self.pool.start(slot)
            self.progress.print(f"{slot.label()}: started for the plan (pid {self.pool.live[slot.index].pid})")
        return started


def claimed_config(spec: Spec, trial: FrozenTrial) -> dict[str, Any]:
    """The config a trial was claimed with (an out-of-memory retry later records its smaller one)."""
    try:
        return spec.config_for(spec.tree.config_from_params(trial.params))
    except KeyError:  # params that do not fill the space (a sample that failed, a space changed since): the stamp
        config = trial.user_attrs.get("config")
        return config if isinstance(config, dict) else {}


def packer_for(spec: Spec, slots: list[Slot]) -> tuple[Packer | None, str | None]:
    """The packer of a ``trials_per_gpu: auto`` run on GPUs, or a line saying why it runs one slot per GPU."""
    r = spec.resources
    if r.trials_per_gpu != "auto" or not slots or not slots[0].devices:
        return None, None
    names = [s.devices[0] for s in slots if s.devices]
    probes = gpu_memory(visible_gpus())
    missing = [n for n in names if n not in probes]
    if missing:
        return None, f"no memory reading for GPU {', '.join(missing)}: trials_per_gpu: auto runs one slot per GPU"
    return Packer(names, [probes[n] for n in names], r.memory_margin, r.trials_per_gpu_max, r.workers), None


def watch_parent(parent: int) -> None:
    """A slot ends with its parent: the kernel sends SIGKILL if it dies (Linux), and a slot never outlives it."""
    with contextlib.suppress(Exception):
        import ctypes

        # SIGKILL, as the parent got: its running trial stays RUNNING with this pid, which is then
        # gone, so the next run reads "process died", retries the config first and resumes it
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        raise SystemExit(1)
