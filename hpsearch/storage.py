"""Open the study storage named by a URL (SQLite file by default, PostgreSQL for many machines)."""

from __future__ import annotations

import re
import sqlite3
import warnings
from pathlib import Path
from typing import Any

from hpsearch.errors import UserError

HEARTBEAT_S = 10  # a running trial's process touches the storage this often
GRACE_S = 30  # a RUNNING trial silent this long belongs to a dead process: it is failed and retried


def redact(url: str) -> str:
    """postgresql://user:secret@host/db -> postgresql://user:***@host/db"""
    return re.sub(r"(//[^/:@]+:)[^@/]*@", r"\1***@", url)


def sqlite_path(url: str) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None


def open_storage(url: str, create: bool = True, heartbeat: bool = True) -> Any:
    """An Optuna RDBStorage; SQLite files use WAL and a long busy timeout so processes can share one."""
    import optuna
    import sqlalchemy.exc

    path = sqlite_path(url)
    engine_kwargs: dict[str, Any] = {}
    if path is not None:
        if not create and not path.exists():
            raise UserError(f"storage: no study database at {path} (has the study been run?)")
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path, timeout=60) as db:
            db.execute("PRAGMA journal_mode=WAL")  # persistent: readers never block the writer
        engine_kwargs = {"connect_args": {"timeout": 60}}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            extra: dict[str, Any] = {}
            if heartbeat:
                extra = {
                    "heartbeat_interval": HEARTBEAT_S,
                    "grace_period": GRACE_S,
                    "heartbeat_stale_trial_callback": optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=3),
                }
            return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, **extra)
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"storage: cannot open {redact(url)}: {redact(first)}") from None
