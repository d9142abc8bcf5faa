"""Run a training script as one trial: ``fn(config, reporter)`` from the outside.

Per trial the adapter:
- appends the config as flags (trial/command/argv.py; keys starting with ``_`` are engine settings);
- sets HPSEARCH_TRIAL_DIR, HPSEARCH_CHECKPOINT, HPSEARCH_TB_DIR, HPSEARCH_FINAL and HPSEARCH_CONFIG;
- reads metrics live from stdout or from the TensorBoard scalars the script writes
  (trial/command/metrics.py) and hands every epoch to ``reporter.report`` (pruning, curves, history);
- ends the process group (SIGTERM, SIGKILL after ``grace_s``) when the reporter stops the trial;
- raises CommandFailed with the last stderr lines when the script exits non-zero.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

from hpsearch.trial.command.argv import flags
from hpsearch.trial.command.metrics import MetricReader
from hpsearch.trial.command.options import FINAL_KEY, Command
from hpsearch.trial.reporter import ScriptReporter

POLL_S = 0.5  # how often TensorBoard event files are read while no line arrives (seconds)
STDERR_LINES = 30  # kept for error.txt and the reason of a failed trial


class CommandFailed(RuntimeError):
    """The script exited non-zero. ``details`` (error.txt) holds the command and its last stderr lines."""

    def __init__(self, reason: str, details: str):
        super().__init__(reason)
        self.details = details
        self.frames: list[Any] = []  # no Python frame of the user's to point at


def make_objective(command: Command) -> Any:
    def objective(config: dict[str, Any], reporter: ScriptReporter) -> dict[str, float]:
        return run_command(command, config, reporter)

    objective.command = command  # type: ignore[attr-defined]
    return objective


def environment(command: Command, config: dict[str, Any], reporter: ScriptReporter) -> dict[str, str]:
    trial_dir = Path(reporter.trial_dir) if reporter.trial_dir is not None else Path(command.cwd)
    checkpoint = reporter.checkpoint_path
    env = {
        **os.environ,
        **command.env,
        "PYTHONUNBUFFERED": "1",  # print() reaches us per line, not per 8 KiB block
        "HPSEARCH_TRIAL_DIR": str(trial_dir),
        "HPSEARCH_TB_DIR": str(trial_dir / "script_tb"),
        "HPSEARCH_FINAL": "1" if config.get(FINAL_KEY) else "0",
        "HPSEARCH_CONFIG": json.dumps({k: v for k, v in config.items() if not k.startswith("_")}),
    }
    if checkpoint is not None:
        env["HPSEARCH_CHECKPOINT"] = str(checkpoint)
    return env


def _adopt_dead_checkpoint(reporter: ScriptReporter) -> None:
    """A dead trial's checkpoint (``reporter.resume_from``) becomes ours, so the script finds it at HPSEARCH_CHECKPOINT."""
    own, other = reporter.checkpoint_path, reporter.resume_from
    if own is not None and other is not None and not Path(own).exists() and Path(other).exists():
        Path(own).parent.mkdir(parents=True, exist_ok=True)
        Path(own).write_bytes(Path(other).read_bytes())


VAR = re.compile(r"\$\{(HPSEARCH_\w+)\}|\$(HPSEARCH_\w+)")


def expand(arg: str, env: dict[str, str]) -> str:
    """``$HPSEARCH_CHECKPOINT`` or ``${HPSEARCH_TRIAL_DIR}`` in the command: the trial's value, so a
    script that takes ``--checkpoint PATH`` needs no change (other ``$`` text is left alone)."""
    return VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), arg)


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGKILL it when hpsearch dies (kill -9), so no orphan trains on."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def run_command(command: Command, config: dict[str, Any], reporter: ScriptReporter) -> dict[str, float]:
    env = environment(command, config, reporter)
    argv = [expand(a, env) for a in command.argv] + flags(config)
    if argv[0] in ("python", "python3"):  # hpsearch's own interpreter (its venv), wherever PATH points
        argv[0] = sys.executable
    Path(env["HPSEARCH_TRIAL_DIR"]).mkdir(parents=True, exist_ok=True)
    _adopt_dead_checkpoint(reporter)
    # Line-buffered: Ray ends a finished or stopped trial by ending its worker, before any close().
    log = (Path(env["HPSEARCH_TRIAL_DIR"]) / "output.log").open("a", encoding="utf-8", buffering=1)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=command.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    except OSError as exc:
        log.close()
        raise CommandFailed(f"cannot start {shlex.join(argv)}: {exc}", str(exc)) from None
    lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
    tail: deque[str] = deque(maxlen=STDERR_LINES)
    readers = [_drain(proc.stdout, "out", lines), _drain(proc.stderr, "err", lines)]
    reader = MetricReader(command, Path(env["HPSEARCH_TB_DIR"]), reporter)
    try:
        _pump(proc, lines, tail, log, reader, readers)
    except BaseException:
        stop(proc, command.grace_s)
        raise
    finally:
        log.close()
    if proc.returncode != 0:
        raise _failure(argv, proc.returncode, list(tail))
    return reader.final()


def _drain(stream: Any, name: str, lines: queue.Queue[tuple[str, str | None]]) -> threading.Thread:
    def run() -> None:
        for line in stream:
            lines.put((name, line.rstrip("\n")))
        lines.put((name, None))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _pump(
    proc: subprocess.Popen[str],
    lines: queue.Queue[tuple[str, str | None]],
    tail: deque[str],
    log: Any,
    reader: MetricReader,
    readers: list[threading.Thread],
) -> None:
    open_streams = 2
    while open_streams:
        try:
            name, line = lines.get(timeout=POLL_S)
        except queue.Empty:
            reader.poll_events(done=False)
            continue
        if line is None:
            open_streams -= 1
            continue
        log.write(("" if name == "out" else "[stderr] ") + line + "\n")
        if name == "err":
            tail.append(line)
        else:
            reader.line(line)
    proc.wait()
    reader.poll_events(done=True)


def stop(proc: subprocess.Popen[str], grace_s: float) -> None:
    """SIGTERM to the whole process group (the script and its data-loader workers), SIGKILL after grace_s."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _failure(argv: list[str], code: int, tail: list[str]) -> CommandFailed:
    last = next((line.strip() for line in reversed(tail) if line.strip()), "")
    details = f"command: {shlex.join(argv)}\nexit status: {code}\nlast stderr lines:\n" + "\n".join(tail) + "\n"
    if code == 2 and "unrecognized arguments" in last:
        return CommandFailed(
            f"the script rejects flags the config passes ({last}): add them to its argument parser, or drop them from the spec's space/fixed",
            details,
        )
    if code < 0:
        return CommandFailed(f"command killed by signal {-code}" + (f": {last}" if last else ""), details)
    return CommandFailed(f"command exited with status {code}" + (f": {last}" if last else ""), details)
