"""Storage URLs, redaction, and the one-commit attribute writes and counts hpsearch adds to Optuna's RDB storage."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from hpsearch.base.errors import UserError
from hpsearch.study.storage import Storage, count_states, open_storage, redact, set_attrs, sqlite_path


@pytest.mark.parametrize(
    "url,shown",
    [
        ("postgresql://u:secret@db:5432/hp", "postgresql://u:***@db:5432/hp"),
        ("postgresql://u:p@ss@db/hp", "postgresql://u:***@db/hp"),  # an unescaped @ in the password
        ("postgresql+psycopg2://:secret@db/hp", "postgresql+psycopg2://:***@db/hp"),
        ("postgresql://u@db:5432/hp", "postgresql://u@db:5432/hp"),
        ("sqlite:////tmp/runs/x/study.db", "sqlite:////tmp/runs/x/study.db"),
    ],
)
def test_redact_hides_every_password_and_only_the_password(url: str, shown: str):
    assert redact(url) == shown


def test_a_new_sqlite_file_is_created_in_wal_mode(tmp_path):
    import sqlite3

    url = f"sqlite:///{tmp_path / 'a' / 'study.db'}"
    open_storage(url)
    assert sqlite_path(url) == tmp_path / "a" / "study.db"
    with sqlite3.connect(tmp_path / "a" / "study.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_missing_file_when_one_is_required_names_the_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=f"no study database at {tmp_path}/nope/study.db"):
        open_storage("sqlite:///nope/study.db", create=False)


def test_an_unreachable_server_is_one_line_without_the_password():
    with pytest.raises(UserError) as err:
        open_storage("postgresql://u:s3cret@127.0.0.1:1/db")
    assert "s3cret" not in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("storage: cannot open postgresql://u:***@127.0.0.1:1/db")


def test_attributes_in_one_write_and_counts_per_state(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(storage=open_storage(f"sqlite:///{tmp_path / 's.db'}"), study_name="s")
    for value in (1.0, 2.0):
        study.tell(study.ask(), value)
    study.tell(study.ask(), state=TrialState.PRUNED)
    running = study.ask()
    set_attrs(study, running, user={"a": 1, "b": [1, 2]}, system={"c": "x"})
    set_attrs(study, running, user={"a": 2})  # an upsert, not a second row
    frozen = study.get_trials()[-1]
    assert frozen.user_attrs == {"a": 2, "b": [1, 2]} and frozen.system_attrs["c"] == "x"
    assert count_states(study) == {TrialState.COMPLETE: 2, TrialState.PRUNED: 1, TrialState.RUNNING: 1}


def test_ending_a_running_trial_is_decided_once_when_two_processes_race(tmp_path):
    """Two processes that both see a dead trial both try to end it; exactly one may (it queues the retry)."""
    import threading

    from hpsearch.study.storage import end_trial

    url = f"sqlite:///{tmp_path / 'race.db'}"
    study = optuna.create_study(storage=open_storage(url), study_name="race")
    numbers = [study.ask().number for _ in range(20)]
    studies = [optuna.load_study(study_name="race", storage=open_storage(url)) for _ in range(2)]
    won: list[list[int]] = [[], []]

    def end_all(i: int) -> None:
        for t in studies[i].get_trials(deepcopy=False):
            if end_trial(studies[i], t, TrialState.FAIL, f"failed: ended by {i}"):
                won[i].append(t.number)

    threads = [threading.Thread(target=end_all, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won[0] + won[1]) == numbers  # each trial ended by exactly one of them
    for t in study.get_trials():
        assert t.state == TrialState.FAIL and t.user_attrs["reason"] == f"failed: ended by {0 if t.number in won[0] else 1}"
    assert not end_trial(study, study.get_trials()[0], TrialState.FAIL, "again")  # an ended trial stays as it ended


def test_a_crash_between_a_dead_trial_s_end_and_its_retry_leaves_neither(tmp_path, monkeypatch):
    """A dead trial's end and its retry are one commit: a process killed between the two writes
    (here: the retry's insert raises) leaves the trial RUNNING for the next look, not FAIL with its
    config lost; the next look ends it and queues exactly one retry."""
    from hpsearch.study.liveness import Dead, bury

    study = optuna.create_study(storage=open_storage(f"sqlite:///{tmp_path / 'crash.db'}"), study_name="crash")
    trial = study.ask({"lr": optuna.distributions.FloatDistribution(0.01, 0.1)})
    real_add = Storage._get_prepared_new_trial

    def killed(self: Storage, *args: Any) -> Any:
        raise SystemExit("killed between the two writes")

    monkeypatch.setattr(Storage, "_get_prepared_new_trial", killed)
    with pytest.raises(SystemExit):
        bury(study, [Dead(study.get_trials()[0], "failed: process died")])
    assert [t.state for t in study.get_trials()] == [TrialState.RUNNING]
    assert "reason" not in study.get_trials()[0].user_attrs  # rolled back with the end
    monkeypatch.setattr(Storage, "_get_prepared_new_trial", real_add)
    assert len(bury(study, [Dead(study.get_trials()[0], "failed: process died")])) == 1
    dead, again = study.get_trials()
    assert dead.state == TrialState.FAIL and dead.user_attrs["reason"] == "failed: process died"
    assert again.state == TrialState.WAITING and again.user_attrs["retry_of"] == trial.number and again.params == dead.params


class _Orig(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


def _failing_then(monkeypatch, errors: list[Exception]) -> list[int]:
    """Storage() raises each of ``errors`` in turn, then succeeds; returns the attempt counter."""
    import hpsearch.study.storage as storage_module

    calls = [0]

    def fake(*args, **kwargs):
        calls[0] += 1
        if errors:
            raise errors.pop(0)
        return "storage"

    monkeypatch.setattr(storage_module, "Storage", fake)
    monkeypatch.setattr(storage_module.time, "sleep", lambda s: None)
    return calls


@pytest.mark.parametrize("sqlstate", ["42P07", "42710"])  # relation / object "already exists"
def test_losing_the_race_to_create_postgres_tables_is_retried(monkeypatch, sqlstate):
    """Workers started together on a fresh PostgreSQL database race to create Optuna's tables; the
    loser's CREATE TABLE fails with duplicate_table (a ProgrammingError, not an IntegrityError)."""
    import sqlalchemy.exc

    from hpsearch.study.storage import _create

    calls = _failing_then(monkeypatch, [sqlalchemy.exc.ProgrammingError("CREATE TABLE studies", {}, _Orig(sqlstate))])
    assert _create("postgresql://h/db", {}, sqlite=False, read_only=False) == "storage"
    assert calls[0] == 2


def test_other_postgres_errors_are_not_retried(monkeypatch):
    import sqlalchemy.exc

    from hpsearch.study.storage import _create

    denied = sqlalchemy.exc.ProgrammingError("CREATE TABLE studies", {}, _Orig("42501"))  # insufficient_privilege
    calls = _failing_then(monkeypatch, [denied])
    with pytest.raises(sqlalchemy.exc.ProgrammingError):
        _create("postgresql://h/db", {}, sqlite=False, read_only=False)
    assert calls[0] == 1


def test_a_slot_claiming_while_the_parent_ends_a_dead_slot_s_trial_gets_its_retry(tmp_path, monkeypatch):
    """The slot pool's parent fails a dead slot's trial and queues its config under the claim lock:
    a claim that comes between the two writes waits, then takes the retry rather than a new config
    (a fresh clone's run once saw the claim win the gap, and the budget end with the retry unrun)."""
    import threading
    from types import SimpleNamespace

    from hpsearch.engine.optuna import claim
    from hpsearch.engine.slots import Watch
    from hpsearch.study.claim import ClaimLock
    from hpsearch.study.liveness import WORKER

    url = f"sqlite:///{tmp_path / 'gap.db'}"
    study = optuna.create_study(storage=open_storage(url), study_name="gap")
    dead = study.ask({"lr": optuna.distributions.FloatDistribution(0.01, 0.1)})
    dead.set_user_attr(WORKER, "host:4711")
    claimed: list[optuna.Trial | None] = []
    threads: list[threading.Thread] = []
    real_add = Storage._get_prepared_new_trial

    def add_after_a_claim_tried(self: Storage, *args: Any) -> Any:
        if not threads:  # the retry's row, after the dead trial's end in the same commit
            other = optuna.load_study(study_name="gap", storage=open_storage(url))
            threads.append(threading.Thread(target=lambda: claimed.append(claim(other, 3, ClaimLock(url, "gap"), None))))  # type: ignore[arg-type]
            threads[0].start()
            threads[0].join(0.5)  # the claim, were it free to, ends in this gap (a flock blocks another handle, threads too)
        return real_add(self, *args)

    monkeypatch.setattr(Storage, "_get_prepared_new_trial", add_after_a_claim_tried)
    watch = Watch(study, None, None, None, set(), lock=ClaimLock(url, "gap"))  # type: ignore[arg-type]
    gone = SimpleNamespace(proc=SimpleNamespace(returncode=-9), worker="host:4711", last_line="", slot=SimpleNamespace(index=1))
    watch.bury([gone], "failed: slot process killed by SIGKILL")  # type: ignore[list-item]
    threads[0].join(60)
    (trial,) = claimed
    assert trial is not None
    assert study.get_trials()[trial.number].user_attrs["retry_of"] == dead.number
