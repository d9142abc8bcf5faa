"""Errors that the CLI turns into one line each and exit code 2 (no traceback)."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a spec, a flag, a path. ``lines`` are printed one per line."""

    def __init__(self, lines: str | list[str]):
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("\n".join(self.lines))


class SpecError(UserError):
    """Every problem found in a spec file, each naming the file and the key path."""
