"""The driver's side of Ray's trials: a Tune callback that writes every trial into the Optuna study.

Params and config are written when Ray asks for a trial (search.py calls ``claimed``), intermediate
values per epoch here, and the end state with the usual user attrs (reason, epochs, wall_s,
metrics, history, ...) when Ray reports the trial finished, stopped or crashed. A Ray scheduler
stops a trial by ending it: the trial is then PRUNED at its last reported epoch.

The driver is the process of record for the trials it asked for, as a claim loop is for its
trial (study/liveness.py): it stamps each with its own identity and beats for it until Ray ends
it. So a killed driver's trials are judged dead by the next run, worker or status like any
other (its pid gone here, its beat still elsewhere), failed, queued and retried first.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import optuna
from optuna.trial import TrialState

from hpsearch.base.interrupts import atomic
from hpsearch.base.text import finite
from hpsearch.engine.ray.trial import ENDED, FINAL_KEY, METRICS_KEY, RESUMED_KEY, trial_config, trial_number
from hpsearch.spec.loader import Spec
from hpsearch.study.checkpoints import RESUMED_FROM, clean_up
from hpsearch.study.counts import contract_broken, reason
from hpsearch.study.deaths import ray_worker_died
from hpsearch.study.liveness import Dead, Heartbeat, bury, retry_of, stamp
from hpsearch.study.progress import Progress
from hpsearch.study.storage import end_trial, storage_of, study_id, trial_id
from hpsearch.study.summary import refresh, trial_value_text


class Recorder:
    """A Tune callback that writes every Ray trial into the Optuna study and prints progress."""

    def __init__(self, study: optuna.Study, spec: Spec, progress: Progress):
        self.study, self.spec, self.progress = study, spec, progress
        self.storage = storage_of(study)
        self.history: dict[int, list[dict[str, float]]] = {}
        self.outcomes: dict[int, dict[str, Any]] = {}
        self.asked: set[int] = set()  # Optuna trials this driver created for Ray
        self.ended: set[int] = set()
        self.running: set[int] = set()
        self.broken: str | None = None  # the objective broke the metric contract: stop the study at once
        self.beat: Heartbeat | None = None  # beats for the trials asked and not ended, while ``beating``

    def __getstate__(self) -> dict[str, Any]:
        return {}  # Tune pickles its run config for its own resume; a recorder is only useful live

    def trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(study_id(self.study), number)

    @contextlib.contextmanager
    def beating(self) -> Iterator[None]:
        self.beat = Heartbeat(self.study)
        try:
            yield
        finally:
            self.beat.stop()

    def claimed(self, trial: optuna.Trial, config: dict[str, Any]) -> None:
        """Ray asked for this trial: it is this driver's, stamped with who the driver is, beating until it ends.
        Called inside ``atomic()`` with the ask (search.py), so that no asked trial goes unstamped."""
        self.asked.add(trial.number)
        stamp(self.study, trial, {"config": config, "backend": "ray"})
        if self.beat is not None:
            self.beat.add(trial_id(trial))

    def on_start(self, trial: Any) -> None:
        self.running.add(trial_number(trial.config))  # pbt: also when a paused trial goes on
        self.progress.counts.running = len(self.running)
        self.progress.refresh()

    def on_result(self, trial: Any, result: dict[str, Any]) -> None:
        number = trial_number(trial.config)
        if FINAL_KEY in result:
            self.outcomes[number] = json.loads(result[FINAL_KEY])
            return
        epoch, metrics = int(result["epoch"]), json.loads(result[METRICS_KEY])
        if RESUMED_KEY in result:
            self.took_over(number, json.loads(result[RESUMED_KEY]))
        self.history.setdefault(number, []).append({"epoch": epoch, **metrics})
        self.progress.epoch(number, epoch, trial_config(trial.config).get("epochs"), metrics)
        first = self.spec.metrics[0]
        if len(self.spec.metrics) == 1 and finite(metrics.get(first)):
            self.storage.set_trial_intermediate_value(self.trial_id(number), epoch, float(metrics[first]))

    def took_over(self, number: int, resumed: dict[str, Any]) -> None:
        """A retry resumed a dead trial's checkpoint: its earlier epochs become this trial's, as on the Optuna backend."""
        tid = self.trial_id(number)
        self.storage.set_trial_user_attr(tid, RESUMED_FROM, {"trial": resumed["trial"], "epoch": resumed["epoch"]})
        self.history[number] = list(resumed["history"])
        first = self.spec.metrics[0]
        for row in resumed["history"]:
            if len(self.spec.metrics) == 1 and finite(row.get(first)):
                self.storage.set_trial_intermediate_value(tid, int(row["epoch"]), float(row[first]))
        self.progress.print(f"trial {number} resumes trial {resumed['trial']} from its epoch {resumed['epoch']} checkpoint")

    def on_end(self, trial: Any, error: str | None) -> None:
        with atomic():  # a SIGTERM meanwhile waits: the trial ended in Ray's view and RUNNING in the study
            self.record_end(trial, error)

    def record_end(self, trial: Any, error: str | None) -> None:
        number = trial_number(trial.config)
        if number in self.ended:
            return
        self.ended.add(number)
        self.running.discard(number)
        self.progress.counts.running = len(self.running)
        history = self.history.pop(number, [])
        ended = self.outcomes.pop(number, None) or self.from_error(error) or self.stopped(trial, history)
        tid = self.trial_id(number)
        attrs = {k: v for k, v in ended.items() if k not in ("state", "values", "died")}
        attrs["history"] = history
        attrs["config"] = trial_config(trial.config)  # pbt: the perturbed config
        for key, value in attrs.items():
            self.storage.set_trial_user_attr(tid, key, value)
        state = {"completed": TrialState.COMPLETE, "pruned": TrialState.PRUNED}.get(ended["state"], TrialState.FAIL)
        values = ended.get("values") if state == TrialState.COMPLETE else None
        before = self.storage.get_trial(tid) if ended.get("died") and state == TrialState.FAIL else None
        again = retry_of(before) if before is not None else None
        if before is not None and again is not None:  # its end and its retry in one commit: a kill -9 between two would lose the retry
            end_trial(self.study, before, state, ended["reason"], then=again)
        else:
            self.study.tell(number, values[0] if values and len(values) == 1 else values, state=state)
        if self.beat is not None:
            self.beat.drop(tid)
        frozen = self.storage.get_trial(tid)
        self.broken = self.broken or contract_broken(frozen)
        if again is not None:  # asked for first in the next round; resumes from its checkpoint
            self.progress.print(f"trial {number} {ended['reason']}: config retried next")
        else:
            with contextlib.suppress(OSError):
                clean_up(self.study, self.spec.study_dir, frozen)
        refresh(self.progress, self.study, self.spec)
        self.progress.counts.running = len(self.running)  # Ray's view: trials paused by pbt are RUNNING in the study
        self.progress.trial(number, reason(frozen), trial_value_text(frozen, self.spec), frozen.params)

    def abandon(self, reason: str = "interrupted") -> list[int]:
        """Trials Ray never ended (Ctrl-C, SIGTERM, a lost cluster, the time budget) must not stay RUNNING and hold
        the budget: failed with ``reason`` and queued again, first, as the Optuna backend does (a gentle stop loses
        no more than kill -9). The numbers of those this call ended.

        The study says which are left, not this driver's memory: an end Ray reported whose record was cut
        short (an error in a write) leaves its trial RUNNING, and it is failed and queued like the rest."""
        with atomic():
            left = [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)) if t.number in self.asked]
            self.ended.update(t.number for t in left)
            if self.beat is not None:
                for t in left:
                    self.beat.drop(trial_id(t))
            ended = bury(self.study, [Dead(t, reason) for t in left])
        return [d.trial.number for d in ended]

    @staticmethod
    def from_error(error: str | None) -> dict[str, Any] | None:
        if error is None:
            return None
        found = ENDED.search(error)
        if found:
            with contextlib.suppress(ValueError):  # binascii.Error and JSONDecodeError are ValueErrors
                ended: dict[str, Any] = json.loads(base64.b64decode(found.group(1), validate=True))
                return ended
        lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
        died = ray_worker_died(error)
        if died is not None:
            return {"state": "failed", "reason": died, "died": True}
        return {"state": "failed", "reason": f"failed: {lines[-1] if lines else 'Ray trial error'}"}

    def stopped(self, trial: Any, history: list[dict[str, float]]) -> dict[str, Any]:
        """Ray's scheduler ended the trial after an epoch: pruned (or completed, if that was its last)."""
        if not history:
            return {"state": "failed", "reason": "interrupted (stopped before its first epoch)"}
        last = history[-1]
        epoch = int(last.get("epoch", 0))
        metrics = {k: v for k, v in last.items() if k != "epoch"}
        wall_s = round(float((trial.last_result or {}).get("time_total_s", 0.0)), 3)
        planned = trial_config(trial.config).get("epochs")
        attrs = {
            "epochs": epoch,
            "wall_s": wall_s,
            "metrics": {k: v for k, v in metrics.items() if finite(v)},
            "samples_per_s": metrics.get("samples_per_s"),
            "peak_mem_mb": metrics.get("peak_mem_mb"),
        }
        values = [metrics.get(m) for m in self.spec.metrics]
        if isinstance(planned, int) and epoch >= planned and all(finite(v) for v in values):
            return {"state": "completed", "reason": "completed", "values": values, **attrs}
        return {"state": "pruned", "reason": f"pruned at epoch {epoch}", **attrs}


def trial_error(trial: Any) -> str:
    """The error text Ray wrote for a trial: its local error file (``get_error`` reads the storage
    copy, which is not synced yet when the callback runs, so it came back empty)."""
    path = trial.error_file
    if path and os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    error = trial.get_error()
    return str(error) if error is not None else "Ray trial error"


def make_callback(recorder: Recorder, on_start: Callable[[], None] | None = None, on_step: Callable[[], None] | None = None) -> Any:
    """The Tune callback over ``recorder``; ``on_start`` is also called as each trial starts, ``on_step`` on each
    step of Tune's loop (what it raises ends the round)."""
    from ray.tune import Callback

    class RecordTrials(Callback):
        def __getstate__(self) -> dict[str, Any]:
            return {}

        def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
            if on_step is not None:
                on_step()

        def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            recorder.on_start(trial)
            if on_start is not None:
                on_start()

        def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any) -> None:
            recorder.on_result(trial, result)

        def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            recorder.on_end(trial, None)

        def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            recorder.on_end(trial, trial_error(trial))

    return RecordTrials()


def make_stopper(recorder: Recorder) -> Any:
    """A Tune stopper that ends the whole run once a trial broke the metric contract."""
    from ray.tune.stopper import Stopper

    class Stop(Stopper):
        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            return False

        def stop_all(self) -> bool:
            return recorder.broken is not None

        def __getstate__(self) -> dict[str, Any]:
            return {}

    return Stop()
