"""``hpsearch``: the parser of every command group, and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from typing import Any

from hpsearch.base.errors import StorageUnreachable, UserError
from hpsearch.cli.args import Parser
from hpsearch.cli.results import add_parsers as add_results
from hpsearch.cli.search import add_parsers as add_search
from hpsearch.cli.training import add_parsers as add_training


def version_lines(verbose: int) -> list[str]:
    """``hpsearch --version``: this package's version; with -v also torch's, optuna's and ray's, read from
    their installed metadata (importing torch and ray would take seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    from hpsearch.base.version import __version__

    lines = [f"hpsearch {__version__}"]
    for name in ("torch", "optuna", "ray") if verbose else ():
        try:
            lines.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            lines.append(f"{name} (not installed)")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="hpsearch", description="Hyperparameter search for PyTorch training.")
    parser.add_argument("--version", action="store_true", help="print hpsearch's version and exit (-v: also torch, optuna and ray)")
    parser.add_argument("-v", dest="verbose", action="count", default=0, help="with --version: also the torch, optuna and ray versions")
    # not required: `hpsearch --version` has no command; main asks for one otherwise
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for add in (add_search, add_results, add_training):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from hpsearch.engine.devices import passive_waits

    passive_waits()  # OMP_WAIT_POLICY=PASSIVE before any command imports torch, unless the user set it
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print("\n".join(version_lines(args.verbose)))
        return 0
    if args.verbose:
        parser.error("-v goes with --version: hpsearch --version -v")
    if args.command is None:
        parser.error("the following arguments are required: command")
    func: Callable[[argparse.Namespace], int] = args.func
    studies = args.command in ("run", "worker", "promote", "audit")
    terminated: list[int] = []
    try:
        with _terminate_as_interrupt(terminated) if studies else contextlib.nullcontext():
            return func(args)
    except UserError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `hpsearch trials SPEC | head`: the reader left, which is fine
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more may reach the closed pipe at exit
        return 0
    except StorageUnreachable as exc:
        print(f"error: {exc}; running trials are retried first by the next run", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        from hpsearch.study.storage import redact

        # the command as typed, but a storage URL's password as *** (the user has it; logs must not)
        again = redact(shlex.join(["hpsearch", *(sys.argv[1:] if argv is None else argv)]))
        done = 'running trials were marked failed (reason "interrupted") and are retried first; ' if studies else ""
        print(f"\ninterrupted; {done}to resume, run the same command again: {again}", file=sys.stderr)
        return 143 if terminated else 130
    except Exception as exc:
        problem = _storage_error(exc)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _terminate_as_interrupt(terminated: list[int]) -> Iterator[None]:
    """SIGTERM (kill, a job scheduler) ends trials like Ctrl-C does: marked failed, never left RUNNING.
    Either waits for the study writes in hand to land (base/interrupts.py)."""
    import signal
    import threading

    from hpsearch.base.interrupts import interrupt

    def handler(signum: int, frame: Any) -> None:
        terminated.append(signum)
        interrupt(signum, frame)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, handler)
    # Ctrl-C stops a run even when its shell started it with SIGINT ignored (`cmd &` in a script)
    previous_int = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _storage_error(exc: Exception) -> str | None:
    """A database that cannot be reached or written: one line, password redacted, no traceback."""
    if type(exc).__module__.split(".")[0] not in ("sqlalchemy", "optuna", "psycopg2", "psycopg", "sqlite3"):
        return None
    from hpsearch.study.storage import redact

    if type(exc).__name__ not in ("OperationalError", "InterfaceError", "StorageInternalError", "DatabaseError"):
        return None
    cause = exc.__cause__ if type(exc).__name__ == "StorageInternalError" and exc.__cause__ else exc
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return f"storage: {redact(first)}"
