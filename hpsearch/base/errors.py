"""Errors that the CLI turns into one line each and exit code 2 (no traceback)."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a spec, a flag, a path. ``lines`` are printed one per line."""

    def __init__(self, lines: str | list[str]):
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("\n".join(self.lines))


class SpecError(UserError):
    """Every problem found in a spec file, each naming the file and the key path."""


class StorageUnreachable(BaseException):
    """The storage stayed unreachable past its outage limit (storage.outage_s, HPSEARCH_OUTAGE_S). A
    BaseException, like KeyboardInterrupt, so that no ``except Exception`` on the way (the
    objective's wrapper, a trial's failure record) turns it into a failed trial: the process stops
    with one line and its running trial stays RUNNING, for the next process to fail with
    ``reason`` (liveness.note_stopped) and retry first."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason  # what the trials this process leaves RUNNING are failed with
