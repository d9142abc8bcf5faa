"""The embedded engine: workers claim trials from the study's storage and run them.

A *worker* runs trials of one study until the study's budget is spent. ``hpsearch run`` is
one worker in this process (or, with several slots, one per slot process: slots.py);
``hpsearch worker`` is the same on any machine that reaches the storage.

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
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.base.cores import cpu_cores
from hpsearch.base.errors import StorageUnreachable
from hpsearch.base.interrupts import interrupt
from hpsearch.engine.devices import THREADS_ENV, in_process, slots_for, threads_notice
from hpsearch.engine.slots import (
    DISK_FULL,
    STOPPED,
    deadline_from_env,
    run_slots,
    spec_from_env,
    watch_parent,
)
from hpsearch.spec.loader import Spec
from hpsearch.study.checkpoints import CHECKPOINT, RESUMED_FROM, clean_up, resume_source, trial_dir
from hpsearch.study.claim import ClaimLock
from hpsearch.study.counts import CLAIMED, contract_broken, finished_count, own_counts, reason
from hpsearch.study.liveness import (
    Dead,
    Heartbeat,
    Observer,
    bury,
    check,
    fail_trials_of,
    intervals,
    note_stopped,
    settle,
    stamp,
    worker_name,
)
from hpsearch.study.open import open_study
from hpsearch.study.progress import Progress
from hpsearch.study.rerun_queue import RERUN_CONFIG, is_reruns, nothing_left
from hpsearch.study.storage import disk_full, frozen, open_storage, outage_limit
from hpsearch.study.summary import Summary, announce, record, refresh, summary, trial_value_text
from hpsearch.trial.objective import load_objective
from hpsearch.trial.reporter import PruneHook, Reporter, ResumeHook
from hpsearch.trial.run import FAILED, PRUNED, run_trial

WAIT_S = 1.0  # a worker with nothing to claim looks again this often (a running trial may fail)
StepHook = Callable[[str, int, float], None]  # (step, trial number, seconds): python -m bench.growth times the loop with it


@contextlib.contextmanager
def timed(hook: StepHook | None, step: str, number: int) -> Iterator[None]:
    if hook is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        hook(step, number, time.perf_counter() - start)


class TrialFailed(Exception):
    """The trial function's way to say FAIL; the reason is already stored."""


# ---------------------------------------------------------------------------- entry points


def run(spec: Spec, quiet: bool = False, seed_salt: int = 0) -> Summary:
    """``hpsearch run`` / ``hpsearch worker``: work on the study with this machine's slots, in this
    process when there is one slot."""
    intervals()  # a bad HPSEARCH_HEARTBEAT_S / HPSEARCH_GRACE_S / HPSEARCH_OUTAGE_S is one line before anything is written
    outage_limit()
    slots = slots_for(spec.resources)
    if in_process(slots, spec.resources):
        spec._threads_cap = slots[0].threads  # a fixed.threads above this process's cores is lowered, as in a slot
        notice = threads_notice(spec.fixed, slots, cpu_cores())
        if notice:
            print(notice, flush=True)
        deadline = time.time() + spec.budget.timeout if spec.budget.timeout else None
        return work(spec, quiet=quiet, deadline=deadline, seed_salt=seed_salt)
    return run_slots(spec, slots, [sys.executable, "-m", "hpsearch.engine.optuna", "--path", spec.path], quiet)


def machine_salt() -> int:
    """``hpsearch worker`` on several machines: a seed shift of its own for each process."""
    return int(hashlib.sha256(worker_name().encode()).hexdigest()[:6], 16)


# ---------------------------------------------------------------------------- one worker


def claim(study: optuna.Study, budget: int, lock: ClaimLock, observer: Observer, reruns: bool = False) -> optuna.Trial | None:
    """A new RUNNING trial of this worker, or None while running + finished trials cover the budget.
    ``reruns`` (promote, audit: study/rerun_queue.py): only a queued run, never a new sample."""
    with lock.held():
        n = own_counts(study)  # imported trials (warm_start.study) do not spend the budget
        if n.get(TrialState.RUNNING) and check(study, observer):  # a dead process's trial failed, its config queued: claimed next
            n = own_counts(study)
        if reruns:
            return study.ask() if n.get(TrialState.WAITING) else None
        if sum(n.get(s, 0) for s in CLAIMED) >= budget:
            return None
        return study.ask()  # stamped with this process's identity once sampled (trial_function): one commit, not two


def work(
    spec: Spec,
    quiet: bool = False,
    announce_lines: bool = True,
    deadline: float | None = None,
    seed_salt: int = 0,
    stop: threading.Event | None = None,
    steps: StepHook | None = None,
    patient: bool = False,
) -> Summary:
    """Claim and run trials until completed + pruned reaches ``budget.trials`` (or time, failures, ``stop``).

    ``announce_lines``: print the first line and each trial's end (a slot leaves that to its parent).
    ``seed_salt``: shifts the sampler seed, so processes sharing a study draw different samples.
    ``patient``: a slot, whose parent reached the storage: wait out an outage at start-up too.
    ``steps``: told how long each step of each trial took (claim, suggest, objective, prune, record, tell, refresh, trial)."""
    stop = stop or threading.Event()
    objective = load_objective(spec.objective, spec.base_dir)
    apply_threads()
    outage_s = spec.storage.outage_s
    storage = open_storage(spec.storage_url, patient=patient, outage_s=outage_s)  # before the lock writes beside it: a bad URL is one line
    lock = ClaimLock(spec.storage_url, spec.study, outage_s)
    with lock.held():  # creating the study under the lock enqueues warm starts once
        study = open_study(spec, seed_salt=seed_salt, storage=storage)
    spec.study_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(spec.study, spec.budget.trials, quiet=quiet)
    observer = Observer(study_dir=spec.study_dir)
    if announce_lines:
        settle(study, observer, progress.print)  # a killed earlier run's trial: failed with a reason, its config next
    refresh(progress, study, spec)
    if announce_lines and not announce(progress, spec, progress.counts.done):
        return summary(study, spec, 0, None)
    fn = trial_function(spec, objective, progress, steps)
    reruns = is_reruns(study)  # promote/audit runs: take queued ones, sample nothing
    ran, failures_in_a_row, stopped_early = 0, 0, None
    trial: optuna.Trial | None = None
    with progress:
        try:
            while not stop.is_set() and (deadline is None or time.time() < deadline):
                started = time.perf_counter()
                trial = claim(study, spec.budget.trials, lock, observer, reruns)
                if trial is None:
                    if nothing_left(study) if reruns else finished_count(study) >= spec.budget.trials:
                        break
                    time.sleep(WAIT_S)
                    continue
                if steps is not None:
                    steps("claim", trial.number, time.perf_counter() - started)
                ran += 1
                progress.counts.running += 1  # this process's trial; the next refresh reads them all from storage
                progress.refresh()
                ended = run_claimed(study, trial, fn, stop, steps)
                with contextlib.suppress(OSError):  # a checkpoint left behind costs disk, never the study
                    clean_up(study, spec.study_dir, ended)
                failures_in_a_row = failures_in_a_row + 1 if ended.state == TrialState.FAIL else 0
                if announce_lines:
                    with timed(steps, "refresh", ended.number):
                        refresh(progress, study, spec, best=ended.state == TrialState.COMPLETE)
                    progress.trial(ended.number, reason(ended), trial_value_text(ended, spec), ended.params)
                if steps is not None:
                    steps("trial", ended.number, time.perf_counter() - started)
                stopped_early = stop_reason(ended, failures_in_a_row, spec.budget.max_failures)
                if stopped_early is not None:
                    break
        except BaseException as exc:
            cut_short(study, spec, trial, exc)
            raise
    return summary(study, spec, ran, stopped_early)


def stop_reason(ended: FrozenTrial, failures_in_a_row: int, limit: int | None) -> str | None:
    """Why the claim loop stops after this trial, if it does."""
    broken = contract_broken(ended)
    if broken is not None:  # a bug, not bad luck: the next trial would fail alike
        return broken
    if limit is not None and failures_in_a_row >= limit:
        return f"{failures_in_a_row} trials failed in a row (budget.max_failures={limit}); last: {ended.user_attrs.get('reason')}"
    return None


def cut_short(study: optuna.Study, spec: Spec, trial: optuna.Trial | None, exc: BaseException) -> None:
    """The claim loop ends on ``exc``: leave the trial it held as the next process should find it."""
    if isinstance(exc, KeyboardInterrupt):  # also a claim cut short between ask() and the objective, before its stamp
        # a gentle stop loses no more than kill -9: the config is queued again, first, and resumes from its checkpoint
        if trial is not None:
            bury(study, [Dead(frozen(study, trial), "interrupted")])
        fail_trials_of(study, worker_name(), "interrupted", retry_them=True)
    elif isinstance(exc, StorageUnreachable):  # nothing can be written now: the next process fails the trial with this reason
        note_stopped(spec.study_dir, [os.getpid()], exc.reason)
    elif isinstance(exc, Exception) and trial is not None and disk_full(exc):
        with contextlib.suppress(Exception):  # end it if one more write fits; else the next run fails it at once
            bury(study, [Dead(frozen(study, trial), "failed: disk full")])


def run_claimed(
    study: optuna.Study, trial: optuna.Trial, fn: Callable[[optuna.Trial], Any], stop: threading.Event, steps: StepHook | None = None
) -> FrozenTrial:
    """Run one claimed trial and record its end state, as study.optimize would."""
    beat = Heartbeat(study, trial)
    values, state = None, TrialState.COMPLETE
    try:
        try:
            values = fn(trial)
        except optuna.TrialPruned:
            state = TrialState.PRUNED
        except TrialFailed:
            state = TrialState.FAIL
        except KeyboardInterrupt:
            bury(study, [Dead(frozen(study, trial), "interrupted")])  # failed and queued again first (work's handler)
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. a storage error while sampling: the trial fails, the worker goes on
            trial.set_user_attr("reason", f"failed: {type(exc).__name__}: {exc}".strip())
            state = TrialState.FAIL
        with timed(steps, "tell", trial.number):
            tell(study, trial, state, values, stop)
    finally:
        beat.stop()
    return frozen(study, trial)


def tell(study: optuna.Study, trial: optuna.Trial, state: TrialState, values: Any = None, stop: threading.Event | None = None) -> None:
    """study.tell outside study.optimize. A sampler that asks the study to stop there (GridSampler,
    once every grid point ran) raises instead; the trial is recorded by then, so stop claiming."""
    try:
        study.tell(trial, values, state=state)
    except RuntimeError as exc:
        if "Study.stop" not in str(exc):
            raise
        if stop is not None:
            stop.set()


def apply_threads() -> None:
    """Slots get OMP_NUM_THREADS before torch loads; this also covers a torch that was imported already."""
    threads = os.environ.get(THREADS_ENV)
    if threads and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))


# ---------------------------------------------------------------------------- the trial body


def trial_function(
    spec: Spec, objective: Any, progress: Progress, steps: StepHook | None = None
) -> Callable[[optuna.Trial], float | list[float]]:
    """Sample, run the objective, record; raises TrialPruned / TrialFailed for run_claimed."""

    def fn(trial: optuna.Trial) -> float | list[float]:
        with timed(steps, "suggest", trial.number):
            params = spec.tree.suggest(trial)
            queued = trial.user_attrs.get(RERUN_CONFIG)  # promote/audit: the re-run's whole config, not the spec's fixed values
            config = spec.config_for(params if queued is None else queued)
            stamp(trial.study, trial, {"config": config})
        folder = trial_dir(spec.study_dir, trial.number)
        source = resume_source(trial.study, spec.study_dir, trial)
        reporter = Reporter(
            trial_dir=folder,
            prune_hook=prune_hook(trial, spec, steps),
            on_epoch=lambda epoch, metrics: progress.epoch(trial.number, epoch, config.get("epochs"), metrics),
            checkpoint_path=folder / CHECKPOINT,
            resume_from=source[1] if source else None,
            on_resume=resumed(trial, spec, source[0], progress) if source else None,
        )
        try:
            with timed(steps, "objective", trial.number):
                outcome = run_trial(objective, config, reporter, spec.metrics)
        except KeyboardInterrupt:
            trial.set_user_attr("reason", "interrupted")
            raise
        with timed(steps, "record", trial.number):
            record(trial.study, trial, outcome, reporter)
            reporter.close(hparams=outcome.config or config, final=outcome.metrics)
        if outcome.state == PRUNED:
            raise optuna.TrialPruned(outcome.reason)
        if outcome.state == FAILED:
            raise TrialFailed(outcome.reason)
        assert outcome.values is not None
        return outcome.values[0] if len(outcome.values) == 1 else outcome.values

    return fn


def resumed(trial: optuna.Trial, spec: Spec, source: int, progress: Progress) -> ResumeHook:
    """A retry took over a dead trial's checkpoint: record where from, and its earlier epochs for the pruner."""

    def hook(epoch: int, history: list[dict[str, float]]) -> None:
        trial.set_user_attr(RESUMED_FROM, {"trial": source, "epoch": epoch})
        if len(spec.metrics) == 1:
            for row in history:
                if spec.metrics[0] in row:
                    trial.report(row[spec.metrics[0]], step=int(row["epoch"]))
        progress.print(f"trial {trial.number} resumes trial {source} from its epoch {epoch} checkpoint")

    return hook


def prune_hook(trial: optuna.Trial, spec: Spec, steps: StepHook | None = None) -> PruneHook | None:
    """Report the first metric per epoch; Optuna cannot prune multi-objective studies."""
    if len(spec.metrics) > 1:
        return None
    metric = spec.metrics[0]

    def hook(epoch: int, metrics: dict[str, float]) -> bool:
        if metric not in metrics:
            return False
        with timed(steps, "prune", trial.number):
            trial.report(metrics[metric], step=epoch)
            return trial.should_prune()

    return hook


# ---------------------------------------------------------------------------- a slot process


def main(argv: list[str] | None = None) -> int:
    """A slot: ``python -m hpsearch.engine.optuna --path SPEC --slot I --parent PID`` (started by slots.run_slots)."""
    ap = argparse.ArgumentParser(prog="hpsearch-slot")
    ap.add_argument("--slot", type=int, required=True)
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    watch_parent(args.parent)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, interrupt)  # both wait for the study writes in hand (base/interrupts.py)
    signal.signal(signal.SIGINT, interrupt)  # the parent's Ctrl-C, even if it was started with SIGINT ignored
    signal.signal(signal.SIGUSR1, lambda signum, frame: stop.set())  # finish the running trial, claim no more
    spec = spec_from_env(args.path)
    try:
        result = work(
            spec,
            quiet=args.quiet,
            announce_lines=False,
            deadline=deadline_from_env(),
            seed_salt=1_000_003 * (args.slot + 1),
            stop=stop,
            patient=True,
        )
    except KeyboardInterrupt:
        return 130
    except StorageUnreachable as exc:  # one line for the parent to relay and record, no traceback
        print(f"error: {exc}", flush=True)
        return 2
    except Exception as exc:
        if disk_full(exc):  # the parent says it once for every slot; no traceback here
            return DISK_FULL
        raise
    if result.stopped_early:
        print(f"stopped: {result.stopped_early}", flush=True)
        return STOPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
