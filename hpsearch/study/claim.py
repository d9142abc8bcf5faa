"""The claim lock: one process at a time counts the budget and claims the next trial."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.base.errors import UserError
from hpsearch.study.storage import (
    cannot_open,
    engine_url,
    redact,
    ride_out,
    sqlite_path,
)

if TYPE_CHECKING:
    pass


class ClaimLock:
    """Makes "count the claimed trials, then create one" atomic across every process on a study."""

    def __init__(self, url: str, study: str, outage_s: float | None = None):
        self.url, self.study = url, study
        self.outage_s = outage_s  # the spec's storage.outage_s (storage.ride_out)
        self.path = sqlite_path(url)
        self.dialect = url.split(":", 1)[0].split("+", 1)[0]
        if self.path is None and self.dialect not in ("postgresql", "postgres"):
            raise UserError(
                f"storage: cannot open {redact(url)}: hpsearch stores studies in sqlite:///PATH or postgresql://USER:PW@HOST/DB"
            )
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
        lock = Path(f"{self.path}.claims.lock")
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            handle = open(lock, "a")  # noqa: SIM115 - closed by the with below
        except OSError as exc:  # a read-only mount, a folder this user may not write
            raise UserError(f"storage: cannot write {lock.resolve()} (the study's claim lock): {exc.strerror or exc}") from None
        with handle:
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
            conn = ride_out(self._locked, redact(self.url), self.outage_s)  # a server restart: wait for it
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise cannot_open(self.url, exc) from None
        try:
            yield
        finally:
            # a connection lost meanwhile took its lock with it (the server ends a session's advisory locks)
            with contextlib.suppress(sqlalchemy.exc.SQLAlchemyError):
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
            conn.close()

    def _locked(self) -> Any:
        """A connection holding the study's advisory lock (released by the server if the connection drops)."""
        import sqlalchemy

        conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": self.key})
        except BaseException:
            conn.close()
            raise
        return conn
