"""Open the study storage named by a URL (SQLite file by default, PostgreSQL for many machines)."""

from __future__ import annotations

import contextlib
import datetime
import errno
import functools
import json
import os
import re
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.base.errors import StorageUnreachable, UserError


def redact(url: str) -> str:
    """postgresql://user:secret@host/db -> postgresql://user:***@host/db"""
    return re.sub(r"(//[^/:@]*:)[^/]*@", r"\1***@", url)


def engine_url(url: str) -> str:
    """The URL as the user wrote it: SQLAlchemy 2 opens postgresql:// with psycopg 3, which hpsearch
    installs, so the same URL works in optuna.load_study and optuna-dashboard. Only the
    postgres:// spelling, which SQLAlchemy does not know, becomes postgresql://."""
    scheme, sep, rest = url.partition("://")
    return f"postgresql://{rest}" if sep and scheme == "postgres" else url


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


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def _check_sqlite_file(path: Path) -> None:
    """A file that is not a SQLite database (corrupt, a study.db overwritten by something else): one
    line now, where SQLite would say "file is not a database" from deep inside a query."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise UserError(f"storage: cannot read {path.resolve()}: {exc.strerror or exc}") from None
    if head and head != SQLITE_MAGIC:
        raise UserError(f"storage: {path.resolve()} is not a SQLite database (corrupt, or not a study file)")


def _why_not_writable(path: Path) -> str:
    """SQLite says only "unable to open database file": name the cause a user can act on."""
    folder = path.parent if path.parent.exists() else Path.cwd()
    with contextlib.suppress(OSError):
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f" ({folder} is on a read-only file system; best, trials, export and report can still read it)"
    return "" if os.access(folder, os.W_OK) else f" (this user may not write {folder})"


def open_storage(url: str, create: bool = True, read_only: bool = False, patient: bool = False, outage_s: float | None = None) -> Storage:
    """An Optuna RDBStorage; SQLite files use WAL and a long busy timeout so processes can share one.

    ``patient``: ride out an outage while connecting (``ride_out``), for a process started on a
    storage another process already reached; otherwise a server that cannot be reached is one line
    at once (a wrong host or port should not wait two minutes). ``outage_s``: the spec's
    ``storage.outage_s``, how long every call rides out an outage (``outage_limit``).
    ``read_only``: a SQLite file the user may not write (best, trials, report): opened with
    ``mode=ro``, no journal change, no tables created (``read_only_url``)."""
    import sqlalchemy.exc

    path = sqlite_path(url)
    engine_kwargs: dict[str, Any] = {}
    if path is not None:
        if (read_only or not create) and not path.exists():
            raise UserError(f"storage: no study database at {path.resolve()} (has the study been run?)")
        if path.exists():
            _check_sqlite_file(path)
        if read_only:
            engine_kwargs = {"connect_args": {"timeout": 60, "uri": True}}
            url = read_only_url(path)
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with sqlite3.connect(path, timeout=60) as db:
                    db.execute("PRAGMA journal_mode=WAL")  # persistent: readers never block the writer
            except (OSError, sqlite3.Error) as exc:
                raise UserError(f"storage: cannot open {path.resolve()}: {exc}{_why_not_writable(path)}") from None
            engine_kwargs = {"connect_args": {"timeout": 60}}
            _fast_sqlite_commits()
    else:
        engine_kwargs = {"pool_pre_ping": True}  # a connection the server dropped (restart) is replaced, not used
    try:
        if read_only and not _has_tables(engine_url(url), engine_kwargs):
            # an empty database: Optuna's own error would be "An exception is raised during the commit"
            raise UserError(f"storage {redact(url)}: no study has been run in this database yet (it holds no Optuna tables)")
        if patient and path is None:  # a storage known to exist (a slot's parent opened it): an outage now is waited out
            storage = ride_out(lambda: _create(engine_url(url), engine_kwargs, sqlite=False, read_only=read_only), redact(url), outage_s)
        else:
            storage = _create(engine_url(url), engine_kwargs, sqlite=path is not None, read_only=read_only)
    except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError, ImportError, ValueError, sqlite3.Error) as exc:
        raise cannot_open(url, exc) from None
    storage.outage_s = outage_s
    return storage


def read_only_url(path: Path) -> str:
    """``mode=ro``; and ``immutable=1`` when that cannot read: a WAL file needs its -shm index,
    which a reader creates when it may write the folder. A folder nobody lets us write, with no
    -shm in it, has no writer at work (a writer would have made one), so reading the file as
    immutable sees all of it."""
    uri = f"file:{path.resolve()}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=60)) as db:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        uri += "&immutable=1"
    return f"sqlite:///{uri}&uri=true"


def disk_full(exc: BaseException | None) -> bool:
    """Whether the storage or the output folder ran out of space (SQLite: "database or disk is full")."""
    for _ in range(10):  # the cause chain: Optuna wraps SQLAlchemy, which wraps the driver
        if exc is None:
            return False
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return True
        if any(text in str(exc) for text in ("database or disk is full", "No space left on device", "could not extend file")):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def cannot_open(url: str, exc: BaseException) -> UserError:
    """One line naming the storage, password removed, for any failure to reach it."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return UserError(f"storage: cannot open {redact(url)}: {redact(first)}")


def _has_tables(url: str, engine_kwargs: dict[str, Any]) -> bool:
    """Whether Optuna's tables exist: a reader must not create them, and Optuna cannot read without."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, **engine_kwargs)
    try:
        return sqlalchemy.inspect(engine).has_table("studies")
    finally:
        engine.dispose()


# PostgreSQL's codes for losing the race to create a table: another process created it (or its
# index or type) between SQLAlchemy's check and its CREATE, or inserted the same first row.
RACE_SQLSTATES = {"42P07", "42710", "23505"}  # duplicate_table, duplicate_object, unique_violation


def _create(url: str, engine_kwargs: dict[str, Any], sqlite: bool, read_only: bool) -> Storage:
    """Processes that open a new database at the same moment race to create its tables: retry.
    (SQLite says so with "database is locked"; PostgreSQL with "relation ... already exists", a
    ProgrammingError, or a unique violation: three workers started together on a fresh database
    hit the first in a CI run.)"""
    import sqlalchemy.exc

    retries = 5
    for attempt in range(retries + 1):
        try:
            # skip_table_creation on a read-only file: there is nothing it may create
            return Storage(url, engine_kwargs=engine_kwargs, skip_table_creation=read_only, skip_compatibility_check=read_only)
        except sqlalchemy.exc.DBAPIError as exc:
            if attempt == retries or not _lost_creation_race(exc, sqlite):
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _lost_creation_race(exc: Any, sqlite: bool) -> bool:
    import sqlalchemy.exc

    if isinstance(exc, sqlalchemy.exc.IntegrityError):
        return True
    if sqlite:
        return isinstance(exc, sqlalchemy.exc.OperationalError)
    return getattr(exc.orig, "sqlstate", None) in RACE_SQLSTATES


# ---------------------------------------------------------------------------- riding out an outage


OUTAGE_ENV = "HPSEARCH_OUTAGE_S"
DEFAULT_OUTAGE_S = 120.0


def outage_limit(spec_s: float | None = None) -> tuple[float, str]:
    """(seconds, where they come from) a process rides out an unreachable storage: HPSEARCH_OUTAGE_S
    when set (an operator's override for a whole fleet), else the spec's ``storage.outage_s``, else 120."""
    text = os.environ.get(OUTAGE_ENV, "").strip()
    if not text:
        return (DEFAULT_OUTAGE_S if spec_s is None else spec_s), "storage.outage_s"
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise UserError(f"{OUTAGE_ENV}={text!r}: expected a number of seconds >= 0")
    return value, OUTAGE_ENV


class Outage:
    """This process's view of an outage: one line when it starts, and when it ended (monotonic s),
    so liveness does not count the time nobody could write a heartbeat."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.since: float | None = None
        self.recovered = 0.0

    def begin(self, limit: float) -> None:
        with self.lock:
            if self.since is None:
                self.since = time.monotonic()
                print(f"storage unreachable, retrying for up to {limit:g} s", file=sys.stderr, flush=True)

    def end(self) -> None:
        with self.lock:
            if self.since is not None:
                self.since, self.recovered = None, time.monotonic()


OUTAGE = Outage()
_retrying = threading.local()  # an outer call already retries: an inner one must not multiply the wait
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


INVALIDATED = "Can't reconnect until invalid transaction is rolled back"  # SQLAlchemy's PendingRollbackError after a lost connection


def unreachable(exc: BaseException) -> bool:
    """A lost or refused connection (server restart, failover, network), not a bad statement."""
    import sqlalchemy.exc

    cause = exc.__cause__ if isinstance(exc, optuna.exceptions.StorageInternalError) and exc.__cause__ else exc
    if isinstance(cause, sqlalchemy.exc.DBAPIError) and cause.connection_invalidated:
        return True
    if isinstance(cause, sqlalchemy.exc.PendingRollbackError) and str(cause).startswith(INVALIDATED):
        return True  # a connection the restart invalidated inside a transaction: a new session recovers
    return isinstance(cause, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError)


def ride_out(call: Callable[[], T], where: str, spec_s: float | None = None, reset: Callable[[], None] | None = None) -> T:
    """``call()``, retried with backoff (0.5 s doubling to 5 s) while the server at ``where`` (a
    URL without its password) is unreachable, up to ``outage_limit(spec_s)``; then StorageUnreachable.
    ``reset()``, when given, runs before each retry (a storage drops this thread's session)."""
    if getattr(_retrying, "on", False):  # an outer call already retries: do not multiply the wait
        return call()
    (limit, source), started, delay = outage_limit(spec_s), None, 0.5
    _retrying.on = True
    try:
        while True:
            try:
                result = call()
            except Exception as exc:
                if not unreachable(exc):
                    raise
                started = time.monotonic() if started is None else started
                waited = time.monotonic() - started
                if waited >= limit:
                    first = (str(exc.__cause__ or exc).strip().splitlines() or [type(exc).__name__])[0]
                    raise StorageUnreachable(
                        f"storage {where} unreachable for {limit:g} s ({source}): {redact(first)}",
                        reason=f"failed: storage unreachable for {limit:g} s ({where})",
                    ) from None
                OUTAGE.begin(limit)
                time.sleep(min(delay, limit - waited))
                if reset is not None:
                    with contextlib.suppress(Exception):  # a session that cannot even close is dropped anyway
                        reset()
                delay = min(delay * 2, 5.0)
                continue
            if started is not None:
                OUTAGE.end()
            return result
    finally:
        _retrying.on = False


def riding_out(method: F) -> F:
    """A Storage method that rides out an outage (``ride_out``). SQLite files have no outages
    (their busy timeout already waits for a writer)."""

    @functools.wraps(method)
    def wrapper(self: Storage, *args: Any, **kwargs: Any) -> Any:
        if self.engine.name == "sqlite":
            return method(self, *args, **kwargs)
        where = self.engine.url.render_as_string(hide_password=True)
        # a retry starts from a new session: the old one may hold a connection the outage invalidated
        return ride_out(lambda: method(self, *args, **kwargs), where, self.outage_s, reset=self.scoped_session.remove)

    return wrapper  # type: ignore[return-value]


class _Lost(Exception):
    """end_if_running: the trial ended in another process first."""


class Storage(optuna.storages.RDBStorage):
    """RDBStorage plus the few queries hpsearch makes often, each one statement and one commit.

    This module is the one place that uses Optuna's private names (its RDB models, a study's
    storage and ids, a trial's id): everything else goes through the functions below.
    """

    outage_s: float | None = None  # the spec's storage.outage_s (ride_out); None: HPSEARCH_OUTAGE_S or 120

    def set_trial_attrs(self, trial_id: int, user: dict[str, Any] | None = None, system: dict[str, Any] | None = None) -> None:
        """Several attributes in one commit, where Optuna's per-key call makes a commit per key:
        8 attributes on SQLite take ~3 ms instead of ~12-17 ms."""
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session
        from sqlalchemy.dialects import postgresql, sqlite

        AttrModel = type[models.TrialUserAttributeModel] | type[models.TrialSystemAttributeModel]
        groups: list[tuple[AttrModel, dict[str, Any]]] = [
            (models.TrialUserAttributeModel, user or {}),
            (models.TrialSystemAttributeModel, system or {}),
        ]
        if not any(attrs for _, attrs in groups):
            return
        dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(self.engine.name)
        with _create_scoped_session(self.scoped_session, True) as session:
            trial = models.TrialModel.find_or_raise_by_id(trial_id, session)
            # Optuna < 5.1 declares plain Column()s (an instance's column reads as Column[Any] to a type
            # checker), 5.1 typed ones: the Enum call is a TrialState to mypy either way, and a no-op at run time
            self.check_trial_is_updatable(trial_id, optuna.trial.TrialState(trial.state))
            for model, attrs in groups:
                if not attrs:
                    continue
                if dialect is None:  # e.g. MySQL: Optuna's own upsert, key by key
                    for key, value in attrs.items():
                        self._set_trial_attr_without_commit(session, model, trial_id, key, value)
                    continue
                rows = [{"trial_id": trial_id, "key": key, "value_json": json.dumps(value)} for key, value in attrs.items()]
                insert = dialect.insert(model).values(rows)
                session.execute(
                    insert.on_conflict_do_update(
                        index_elements=[model.trial_id, model.key], set_={"value_json": insert.excluded.value_json}
                    )
                )

    def end_if_running(self, trial_id: int, state: optuna.trial.TrialState, reason: str, then: FrozenTrial | None = None) -> bool:
        """Compare-and-set: end the trial only if it is still RUNNING, in one UPDATE, with its reason and ``then``
        (a trial to add: its retry) in the same commit; False when it had ended. So neither a race nor a kill -9
        ends a trial twice or without its retry (Optuna's read-check-write: SQLite does not lock the row it read)."""
        import sqlalchemy
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session

        try:
            with _create_scoped_session(self.scoped_session, True) as session:
                if then is not None:  # the study's row first, as Optuna's own trial creation locks it
                    study = int(models.TrialModel.find_or_raise_by_id(trial_id, session).study_id)  # type: ignore[arg-type]
                    models.StudyModel.find_or_raise_by_id(study, session, for_update=True)
                # the reason first: Optuna's upsert refuses a trial that has ended already
                self._set_trial_attr_without_commit(session, models.TrialUserAttributeModel, trial_id, "reason", reason)
                done = session.execute(
                    sqlalchemy.update(models.TrialModel)
                    .where(models.TrialModel.trial_id == trial_id, models.TrialModel.state == optuna.trial.TrialState.RUNNING)
                    .values({models.TrialModel.state: state})
                    .execution_options(synchronize_session=False)
                )
                if getattr(done, "rowcount", 0) != 1:
                    raise _Lost  # another process ended it between the two statements: roll the reason back
                # the end time through Optuna's model (its column name and time zone differ between versions)
                models.TrialModel.find_or_raise_by_id(trial_id, session).datetime_complete = datetime.datetime.now()
                if then is not None:
                    self._get_prepared_new_trial(study, then, session)
        except (_Lost, optuna.exceptions.UpdateFinishedTrialError):
            return False
        return True

    def count_states(self, study_id: int) -> dict[optuna.trial.TrialState, int]:
        """Trials of the study per state, counted by the database (reading them all costs O(trials))."""
        import sqlalchemy
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session

        with _create_scoped_session(self.scoped_session) as session:
            rows = (
                session.query(models.TrialModel.state, sqlalchemy.func.count(models.TrialModel.trial_id))
                .filter(models.TrialModel.study_id == study_id)
                .group_by(models.TrialModel.state)
                .all()
            )
        return {optuna.trial.TrialState(state) if not isinstance(state, optuna.trial.TrialState) else state: n for state, n in rows}


# Every call a worker makes while trials run, including the private ones Optuna's cache layer
# (_CachedStorage) calls directly: a suggest() during a restart goes through _set_trial_param.
RIDDEN = (
    "create_new_study", "get_study_id_from_name", "get_study_name_from_id", "get_study_directions",
    "get_study_user_attrs", "get_study_system_attrs", "set_study_user_attr", "set_study_system_attr",
    "get_all_studies", "create_new_trial", "_create_new_trial", "set_trial_param", "_set_trial_param",
    "get_trial_id_from_study_id_trial_number", "get_trial_param", "set_trial_state_values",
    "set_trial_intermediate_value", "set_trial_user_attr", "set_trial_system_attr", "get_trial",
    "get_trial_user_attrs", "get_trial_system_attrs", "get_all_trials", "_get_trials", "get_best_trial",
    "_get_best_trial_id", "get_n_trials", "set_trial_attrs", "end_if_running", "count_states",
)  # fmt: skip
for _name in RIDDEN:
    if hasattr(Storage, _name):  # a private name another Optuna version lacks
        setattr(Storage, _name, riding_out(getattr(Storage, _name)))


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The study's storage, under Optuna's cache wrapper."""
    backend: optuna.storages.BaseStorage = getattr(study._storage, "_backend", study._storage)
    return backend


def study_id(study: optuna.Study) -> int:
    return study._study_id


def study_trials(study: Any, deepcopy: bool, states: Any, use_cache: bool) -> list[optuna.trial.FrozenTrial]:
    """``Study._get_trials``: the samplers' own (private) read, with its trial cache."""
    return study._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache)  # type: ignore[no-any-return]


def trial_id(trial: optuna.Trial | optuna.trial.FrozenTrial) -> int:
    return trial._trial_id


def set_attrs(
    study: optuna.Study,
    trial: optuna.Trial | optuna.trial.FrozenTrial,
    user: dict[str, Any] | None = None,
    system: dict[str, Any] | None = None,
) -> None:
    """User and system attributes of a trial in one commit (key by key on storages that are not ours)."""
    storage, tid = storage_of(study), trial_id(trial)
    if isinstance(storage, Storage):
        storage.set_trial_attrs(tid, user, system)
        return
    for key, value in (user or {}).items():
        storage.set_trial_user_attr(tid, key, value)
    for key, value in (system or {}).items():
        storage.set_trial_system_attr(tid, key, value)


def count_states(study: optuna.Study) -> dict[optuna.trial.TrialState, int]:
    storage = storage_of(study)
    if isinstance(storage, Storage):
        return storage.count_states(study_id(study))
    return dict(Counter(t.state for t in study.get_trials(deepcopy=False)))


def trial_by_number(study: optuna.Study, number: int) -> optuna.trial.FrozenTrial:
    storage = storage_of(study)
    return storage.get_trial(storage.get_trial_id_from_study_id_trial_number(study_id(study), number))


def frozen(study: optuna.Study, trial: optuna.Trial) -> optuna.trial.FrozenTrial:
    return storage_of(study).get_trial(trial_id(trial))


def end_trial(
    study: optuna.Study, trial: optuna.Trial | FrozenTrial, state: TrialState, reason: str, then: FrozenTrial | None = None
) -> bool:
    """FAIL (or another end state) a trial left RUNNING, with a reason; ``then`` (its retry) in the same commit."""
    storage = storage_of(study)
    if isinstance(storage, Storage):
        return storage.end_if_running(trial_id(trial), state, reason, then)
    try:  # a storage that is not ours: Optuna's calls (a race between two processes may end it twice)
        storage.set_trial_user_attr(trial_id(trial), "reason", reason)
        storage.set_trial_state_values(trial_id(trial), state)
    except optuna.exceptions.UpdateFinishedTrialError:
        return False  # it ended after all, or another process ended it first
    if then is not None:
        study.add_trial(then)
    return True
