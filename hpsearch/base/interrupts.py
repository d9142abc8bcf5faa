"""Ctrl-C and SIGTERM as KeyboardInterrupt, held back while the study is half-written.

A run turns both signals into KeyboardInterrupt (cli/main.py, a slot process), raised wherever the
main thread is. Raised between two writes that belong together (a trial's end and its record; a
trial failed and its config queued again; a trial asked and stamped as this process's), it left
the study half-written: a trial RUNNING that no process holds, which the next run must wait to
judge dead. Code in ``atomic()`` runs to its end first; the interrupt is raised as it leaves.
A second signal while one is held is raised at once: a user pressing Ctrl-C again means now.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_held: list[int] = []  # signals that arrived inside atomic(), raised as it ends
_depth = 0  # atomic() blocks open on the main thread


def interrupt(signum: int, frame: Any) -> None:
    """The signal handler: KeyboardInterrupt now, or as the open ``atomic()`` block ends."""
    if _depth and not _held:
        _held.append(signum)
        return
    _held.clear()
    raise KeyboardInterrupt


@contextlib.contextmanager
def atomic() -> Iterator[None]:
    """Writes that must land together: a signal waits for the block's end (signals reach the main thread only)."""
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    except Exception as exc:
        if _leave():  # raised over the error in flight, which an ``except Exception`` on the way could swallow
            raise KeyboardInterrupt from exc
        raise
    except BaseException:  # already stopping (KeyboardInterrupt, StorageUnreachable): that stop goes on
        _leave()
        raise
    if _leave():
        raise KeyboardInterrupt


def _leave() -> bool:
    """Close one block; whether a held signal is due now."""
    global _depth
    _depth -= 1
    due = _depth == 0 and bool(_held)
    if due:
        _held.clear()
    return due
