"""Open the study storage named by a URL (SQLite file by default, PostgreSQL for many machines)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sqlite3
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import optuna

from hpsearch.errors import UserError


def _env_seconds(name: str, default: int) -> int:
    """A whole number of seconds from the environment (tests use 1 s / 3 s); bad values are reported by open_storage."""
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else default


HEARTBEAT_S = _env_seconds("HPSEARCH_HEARTBEAT_S", 10)  # a running trial's process touches the storage this often
GRACE_S = _env_seconds("HPSEARCH_GRACE_S", 30)  # a RUNNING trial silent this long belongs to a dead process: failed, retried
MAX_RETRY = 3  # a config whose process died is queued again at most this often
DIED = "failed: process died (no heartbeat for {grace} s)"


def redact(url: str) -> str:
    """postgresql://user:secret@host/db -> postgresql://user:***@host/db"""
    return re.sub(r"(//[^/:@]*:)[^/]*@", r"\1***@", url)


def engine_url(url: str) -> str:
    """postgres:// and postgresql:// name the driver that is installed (SQLAlchemy 2.1 assumes psycopg 3)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("postgres", "postgresql"):
        has_v3 = importlib.util.find_spec("psycopg") is not None
        has_v2 = importlib.util.find_spec("psycopg2") is not None
        return f"postgresql+{'psycopg2' if has_v2 and not has_v3 else 'psycopg'}://{rest}"
    return url


def sqlite_path(url: str) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None


def _fast_sqlite_commits() -> None:
    """WAL with synchronous=NORMAL: a commit no longer waits for fsync; a crash of the process
    loses nothing, a power cut may lose the last commits. Set per connection, so on connect."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _on_connect):
        event.listen(Engine, "connect", _on_connect)


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")


def open_storage(url: str, create: bool = True, heartbeat: bool = True) -> Any:
    """An Optuna RDBStorage; SQLite files use WAL and a long busy timeout so processes can share one."""
    import sqlalchemy.exc

    if heartbeat:  # before anything is written
        _checked_env("HPSEARCH_HEARTBEAT_S", HEARTBEAT_S)
        _checked_env("HPSEARCH_GRACE_S", GRACE_S)
        if GRACE_S <= HEARTBEAT_S:
            raise UserError(f"HPSEARCH_GRACE_S={GRACE_S} must be longer than HPSEARCH_HEARTBEAT_S={HEARTBEAT_S}")
    path = sqlite_path(url)
    engine_kwargs: dict[str, Any] = {}
    if path is not None:
        if not create and not path.exists():
            raise UserError(f"storage: no study database at {path} (has the study been run?)")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with sqlite3.connect(path, timeout=60) as db:
                db.execute("PRAGMA journal_mode=WAL")  # persistent: readers never block the writer
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"storage: cannot open {path}: {exc}") from None
        engine_kwargs = {"connect_args": {"timeout": 60}}
        _fast_sqlite_commits()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            extra: dict[str, Any] = {}
            if heartbeat:
                extra = {
                    "heartbeat_interval": HEARTBEAT_S,
                    "grace_period": GRACE_S,
                    "heartbeat_stale_trial_callback": RetryStale(max_retry=MAX_RETRY),
                }
            return _create(engine_url(url), engine_kwargs, extra, sqlite=path is not None)
    except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError, ImportError, ValueError) as exc:
        raise cannot_open(url, exc) from None


def cannot_open(url: str, exc: BaseException) -> UserError:
    """One line naming the storage, password removed, for any failure to reach it."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return UserError(f"storage: cannot open {redact(url)}: {redact(first)}")


def _checked_env(name: str, value: int) -> None:
    text = os.environ.get(name)
    if text is not None and _env_seconds(name, -1) == -1:
        raise UserError(f"{name}={text!r}: expected a whole number of seconds > 0")


def _create(url: str, engine_kwargs: dict[str, Any], extra: dict[str, Any], sqlite: bool) -> Any:
    """Processes that open a new database at the same moment race to create its tables: retry.
    (SQLite says so with "database is locked", PostgreSQL with a unique violation.)"""
    import sqlalchemy.exc

    retries = 5
    racing = (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.OperationalError) if sqlite else (sqlalchemy.exc.IntegrityError,)
    for attempt in range(retries + 1):
        try:
            return HeartbeatStorage(url, engine_kwargs=engine_kwargs, **extra)
        except racing:
            if attempt == retries:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


class HeartbeatStorage(optuna.storages.RDBStorage):
    """RDBStorage whose heartbeat-stale trials get a readable ``reason`` before Optuna fails them.

    Optuna's ``fail_stale_trials`` asks for the stale ids, then sets FAIL (after which no
    attribute can be written) and runs the retry callback; the reason is written in between.
    """

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        stale = super()._get_stale_trial_ids(study_id) + self._never_beat(study_id)
        for trial_id in stale:
            try:
                self.set_trial_user_attr(trial_id, "reason", DIED.format(grace=self.grace_period))
            except optuna.exceptions.UpdateFinishedTrialError:
                pass  # another process failed it first
        return stale

    def set_trial_user_attrs(self, trial_id: int, attrs: dict[str, Any]) -> None:
        """Several user attributes in one statement and one commit, where Optuna's per-key call makes a
        commit (or three statements) per key: 8 attributes on SQLite take ~3 ms instead of ~12-17 ms."""
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session
        from sqlalchemy.dialects import postgresql, sqlite

        if not attrs:
            return
        dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(self.engine.name)
        model = models.TrialUserAttributeModel
        with _create_scoped_session(self.scoped_session, True) as session:
            if dialect is None:  # e.g. MySQL: Optuna's own upsert, key by key
                for key, value in attrs.items():
                    self._set_trial_attr_without_commit(session, model, trial_id, key, value)
                return
            trial = models.TrialModel.find_or_raise_by_id(trial_id, session)
            self.check_trial_is_updatable(trial_id, trial.state)
            rows = [{"trial_id": trial_id, "key": key, "value_json": json.dumps(value)} for key, value in attrs.items()]
            insert = dialect.insert(model).values(rows)
            session.execute(insert.on_conflict_do_update(index_elements=[model.trial_id, model.key], set_={"value_json": insert.excluded.value_json}))

    def _never_beat(self, study_id: int) -> list[int]:
        """RUNNING trials whose process died between creating them and its first heartbeat (Optuna skips these)."""
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session

        assert self.grace_period is not None
        cutoff = _utc_now() - timedelta(seconds=self.grace_period)
        with _create_scoped_session(self.scoped_session) as session:
            rows = (
                session.query(models.TrialModel.trial_id)
                .outerjoin(models.TrialHeartbeatModel, models.TrialHeartbeatModel.trial_id == models.TrialModel.trial_id)
                .filter(models.TrialModel.study_id == study_id)
                .filter(models.TrialModel.state == optuna.trial.TrialState.RUNNING)
                .filter(models.TrialHeartbeatModel.trial_heartbeat_id.is_(None))
                .filter(models.TrialModel._datetime_start_utc < cutoff)  # naive UTC, as Optuna stores it
                .all()
            )
        return [row[0] for row in rows]

    def silent_trials(self, study_id: int, seconds: float) -> dict[int, float]:
        """RUNNING trials whose process has not beaten for ``seconds``: trial id -> seconds of silence."""
        import sqlalchemy
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session

        with _create_scoped_session(self.scoped_session) as session:
            now = session.execute(sqlalchemy.func.now()).scalar().replace(tzinfo=None)  # heartbeats are in DB time
            rows = (
                session.query(models.TrialModel.trial_id, models.TrialModel._datetime_start_utc, models.TrialHeartbeatModel.heartbeat)
                .outerjoin(models.TrialHeartbeatModel, models.TrialHeartbeatModel.trial_id == models.TrialModel.trial_id)
                .filter(models.TrialModel.study_id == study_id)
                .filter(models.TrialModel.state == optuna.trial.TrialState.RUNNING)
                .all()
            )
        ages = {i: (now - beat if beat is not None else _utc_now() - start).total_seconds() for i, start, beat in rows}
        return {i: age for i, age in ages.items() if age >= seconds}


def fail_and_retry(study: optuna.Study, trial_id: int, reason: str) -> None:
    """End a RUNNING trial whose process is known to be dead: FAIL with ``reason``, then queue its
    params again, as the heartbeat check does after the grace period."""
    storage = study._storage
    try:
        storage.set_trial_user_attr(trial_id, "reason", reason)
        storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)
    except optuna.exceptions.UpdateFinishedTrialError:
        return  # it ended after all, or another process failed it first
    RetryStale(max_retry=MAX_RETRY)(study, storage.get_trial(trial_id))


def _utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def backend_storage(study: optuna.Study) -> Any:
    """The storage under Optuna's cache wrapper."""
    return getattr(study._storage, "_backend", study._storage)


class RetryStale(optuna.storages.RetryHeartbeatStaleTrialCallback):
    """Queue the dead trial's params again (same config), without its end-of-trial attributes."""

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        kept = {k: v for k, v in trial.user_attrs.items() if k not in ("reason", "worker")}
        trial.user_attrs = {**kept, "retry_of": trial.number}
        super().__call__(study, trial)
