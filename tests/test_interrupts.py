"""A Ctrl-C or SIGTERM that lands between two study writes that belong together waits for the second
(hpsearch/base/interrupts.py): real signals raised in the main thread, a real SQLite study, the Ray recorder as
Tune calls it (CI once caught a SIGTERM between a trial's end in Ray and its record, left RUNNING)."""

from __future__ import annotations

import json
import signal
import threading
from types import SimpleNamespace

import pytest
from optuna.trial import TrialState

from hpsearch.base.interrupts import atomic, interrupt
from hpsearch.engine.ray.recorder import Recorder
from hpsearch.engine.ray.trial import FINAL_KEY, KEY
from hpsearch.spec.loader import load_spec
from hpsearch.study.liveness import Dead, bury
from hpsearch.study.open import open_study
from hpsearch.study.progress import Progress
from hpsearch.study.storage import Storage, storage_of


@pytest.fixture
def handler():
    """The run's handlers (cli/main.py) on both signals, as during ``hpsearch run``."""
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, old in previous.items():
        signal.signal(sig, old)


def test_a_signal_inside_atomic_is_raised_as_the_block_ends(handler):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with atomic():
            signal.raise_signal(signal.SIGTERM)
            done.append("first write")
            with atomic():  # nested: the outermost block decides
                done.append("second write")
            done.append("third write")
    assert done == ["first write", "second write", "third write"]
    with atomic():  # nothing is left held for the next block
        done.append("later")
    assert done[-1] == "later"


def test_a_second_signal_is_raised_at_once(handler):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with atomic():
            signal.raise_signal(signal.SIGINT)
            done.append("after the first")
            signal.raise_signal(signal.SIGINT)
            done.append("after the second")
    assert done == ["after the first"]


def test_an_error_in_the_block_does_not_swallow_the_held_stop(handler):
    with pytest.raises(KeyboardInterrupt) as raised:
        with atomic():
            signal.raise_signal(signal.SIGTERM)
            raise ValueError("a write failed")
    assert isinstance(raised.value.__cause__, ValueError)


def test_off_the_main_thread_atomic_holds_nothing(handler):
    seen = []

    def body():
        with atomic():
            seen.append("ran")

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == ["ran"]


@pytest.fixture
def ray_study(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        f"study: sig\nobjective: x.py:f\noutput: {tmp_path / 'runs'}\nbackend: ray\nspace:\n  lr: {{float: [0.01, 0.1], log: true}}\n"
    )
    spec = load_spec(path, check_objective=False)
    study = open_study(spec)
    recorder = Recorder(study, spec, Progress(spec.study, 3, quiet=True))
    return spec, study, recorder


def ask(study, recorder):
    trial = study.ask()
    trial.suggest_float("lr", 0.01, 0.1, log=True)
    recorder.claimed(trial, {"lr": trial.params["lr"]})
    return SimpleNamespace(config={KEY: {"trial": trial.number, "config": {"lr": trial.params["lr"], "epochs": 1}}}, last_result={})


def test_a_sigterm_while_the_recorder_writes_a_trials_end_waits_for_the_record(handler, ray_study, monkeypatch):
    spec, study, recorder = ray_study
    ray_trial = ask(study, recorder)
    recorder.on_result(ray_trial, {FINAL_KEY: json.dumps({"state": "completed", "reason": "completed", "values": [0.9]})})
    storage = storage_of(study)
    write = storage.set_trial_user_attr

    def signalled_write(*args):  # the scheduler's SIGTERM lands between the first user attr and the tell
        if not getattr(signalled_write, "sent", False):
            signalled_write.sent = True
            signal.raise_signal(signal.SIGTERM)
        write(*args)

    monkeypatch.setattr(storage, "set_trial_user_attr", signalled_write)
    with pytest.raises(KeyboardInterrupt):
        recorder.on_end(ray_trial, None)
    (trial,) = study.get_trials()
    assert trial.state == TrialState.COMPLETE and trial.value == 0.9
    assert recorder.abandon() == []


def test_abandon_reads_the_study_not_its_memory(ray_study):
    """An end Ray reported whose record was cut short (here: an error in the tell) leaves the trial RUNNING:
    the driver's stop fails it and queues its config, as for a trial Ray never ended."""
    spec, study, recorder = ray_study
    cut = ask(study, recorder)
    ask(study, recorder)  # still running in Ray
    recorder.ended.add(cut.config[KEY]["trial"])  # on_end got this far before its writes failed
    assert recorder.abandon() == [0, 1]
    trials = study.get_trials()
    assert [t.state for t in trials[:2]] == [TrialState.FAIL, TrialState.FAIL]
    assert sorted(t.user_attrs["retry_of"] for t in trials if t.state == TrialState.WAITING) == [0, 1]


def test_bury_fails_and_queues_together_under_a_signal(handler, ray_study, monkeypatch):
    spec, study, recorder = ray_study
    ask(study, recorder)
    real = Storage._get_prepared_new_trial

    def add_after_a_signal(self, *args):
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C after the trial was failed, before its retry is added
        return real(self, *args)

    monkeypatch.setattr(Storage, "_get_prepared_new_trial", add_after_a_signal)
    with pytest.raises(KeyboardInterrupt):
        bury(study, [Dead(study.get_trials()[0], "interrupted")])
    states = [t.state for t in study.get_trials()]
    assert states == [TrialState.FAIL, TrialState.WAITING]


def test_a_ray_trial_whose_worker_died_ends_with_its_retry_in_one_commit(ray_study, monkeypatch):
    """The recorder fails a trial whose Ray worker died and queues its config in one commit: a driver
    killed between the two writes leaves the trial RUNNING (its stop or the next run buries it), never
    FAIL with its retry lost."""
    spec, study, recorder = ray_study
    died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    first, second = ask(study, recorder), ask(study, recorder)
    real = Storage._get_prepared_new_trial
    monkeypatch.setattr(Storage, "_get_prepared_new_trial", lambda *args: (_ for _ in ()).throw(SystemExit("killed")))
    with pytest.raises(SystemExit):
        recorder.on_end(first, died)
    assert [t.state for t in study.get_trials()] == [TrialState.RUNNING, TrialState.RUNNING]
    monkeypatch.setattr(Storage, "_get_prepared_new_trial", real)
    recorder.on_end(second, died)
    dead, again = study.get_trials()[1:]
    assert dead.state == TrialState.FAIL and dead.user_attrs["reason"] == "failed: process died (its Ray worker exited)"
    assert again.state == TrialState.WAITING and again.user_attrs["retry_of"] == dead.number
