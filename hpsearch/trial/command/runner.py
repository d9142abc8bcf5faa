"""Run a training script as one trial: ``fn(config, reporter)`` from the outside.

Per trial the adapter:
- appends the config as arguments in the command's flag style (argv.py; keys starting with ``_`` are
  engine settings) and starts it in the spec's folder, or with ``workdir: trial`` in the trial's own;
- sets HPSEARCH_TRIAL_DIR, HPSEARCH_CHECKPOINT, HPSEARCH_TB_DIR, HPSEARCH_FINAL and HPSEARCH_CONFIG;
  with ``config_file``, writes the trial's copy of that file and sets HPSEARCH_CONFIG_FILE (config_file.py);
- reads metrics live from what the script prints (both streams) or from the log files it writes
  (metrics.py) and hands every step to ``reporter.report`` (pruning, curves, history);
- ends the process group (SIGTERM, SIGKILL after ``grace_s``) when the reporter stops the trial;
- raises CommandFailed with the last stderr line (and the flag style that would fix it, hints.py)
  when the script exits non-zero, and ContractError when it never printed the spec's metric.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import Any

from hpsearch.base.text import closest
from hpsearch.trial.command.argv import anchored_config, command_line
from hpsearch.trial.command.config_file import write as write_config_file
from hpsearch.trial.command.hints import style_hint, workdir_hint
from hpsearch.trial.command.metrics import MetricReader
from hpsearch.trial.command.options import FINAL_KEY, Command
from hpsearch.trial.reporter import ContractError, ScriptReporter

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
    # absolute: the script may run in another folder (workdir: trial) than the one `hpsearch train -o run` was given in
    trial_dir = (Path(reporter.trial_dir) if reporter.trial_dir is not None else Path(command.cwd)).absolute()
    checkpoint = Path(reporter.checkpoint_path).absolute() if reporter.checkpoint_path is not None else None
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
    if command.config_file is not None:  # the trial's copy of the base file (config_file.py)
        env["HPSEARCH_CONFIG_FILE"] = str(trial_dir / Path(command.config_file).name)
    if command.workdir == "trial":  # `python -m package.train` still finds the spec folder's packages
        env["PYTHONPATH"] = os.pathsep.join(p for p in (command.cwd, env.get("PYTHONPATH", "")) if p)
    return env


def _adopt_dead_checkpoint(reporter: ScriptReporter) -> None:
    """A dead trial's checkpoint (``reporter.resume_from``) becomes ours, so the script finds it at HPSEARCH_CHECKPOINT."""
    own, other = reporter.checkpoint_path, reporter.resume_from
    if own is not None and other is not None and not Path(own).exists() and Path(other).exists():
        Path(own).parent.mkdir(parents=True, exist_ok=True)
        Path(own).write_bytes(Path(other).read_bytes())


def trial_argv(command: Command, config: dict[str, Any], env: dict[str, str]) -> list[str]:
    """The trial's whole command line, as it is started (``hpsearch validate`` prints a sample's)."""
    base = Path(command.cwd) if command.workdir == "trial" else None
    return command_line(command.argv, {} if command.config_file else config, command.flags, env, base)  # a file: no flags


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGKILL it when hpsearch dies (kill -9), so no orphan trains on."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def run_command(command: Command, config: dict[str, Any], reporter: ScriptReporter) -> dict[str, float]:
    env = environment(command, config, reporter)
    argv = trial_argv(command, config, env)
    trial_dir = Path(env["HPSEARCH_TRIAL_DIR"])
    workdir = command.workdir_for(trial_dir)
    trial_dir.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    if command.config_file is not None:  # its paths anchored as the flags' would be
        values = anchored_config(config, Path(command.cwd)) if command.workdir == "trial" else config
        write_config_file(command.config_file, values, command.flags, trial_dir)
    _adopt_dead_checkpoint(reporter)
    # Line-buffered: Ray ends a finished or stopped trial by ending its worker, before any close().
    log = (trial_dir / "output.log").open("a", encoding="utf-8", buffering=1)
    reader = MetricReader(command, Path(env["HPSEARCH_TB_DIR"]), reporter, workdir)  # before the start: older logs are not ours
    try:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
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
    recent: deque[str] = deque(maxlen=3)
    _drain(proc.stdout, "out", lines), _drain(proc.stderr, "err", lines)
    try:
        _pump(proc, lines, (tail, recent), log, reader)
    except BaseException:
        stop(proc, command.grace_s)
        raise
    finally:
        log.close()
    if proc.returncode != 0:
        raise _failure(argv, proc.returncode, list(tail), config, command)
    _check_metrics(reader, getattr(reporter, "metric_names", None), list(recent))
    return reader.final()


def _check_metrics(reader: MetricReader, names: list[str] | None, recent: list[str]) -> None:
    """A spec metric the script never printed (as hpsearch reads it): one line naming what it did print."""
    found = reader.found()
    if not names or not set(names).isdisjoint(reader.delivered()):
        return
    wanted = repr(names[0]) if len(names) == 1 else f"any of {names}"
    stepless = [n for n in names if n in found]
    if stepless:
        raise ContractError(
            f"the script printed {stepless[0]!r} (the spec's metric:) only on lines without a step: print one with it or on a line "
            f"above it ('epoch 3 {stepless[0]}=0.41', 'step 100: ...'); its last lines: {' | '.join(r.strip() for r in recent)}"
        )
    if found:
        printed = f"it printed {found}" + (f" (steps from {reader.steps.unit})" if reader.steps.unit else "")
    else:
        printed = f"it printed no metric that metrics: {reader.command.metrics} reads (a step such as 'epoch 3' or 'step 100' must be on the line or above it)"
    near = closest(names[0], found)
    fix = f"did you mean {near!r}?" if near else f"or give its regex: objective.metrics: {{{names[0]}: 'val loss ([\\d.]+)'}}"
    last = " | ".join(line.strip() for line in recent) or "(nothing)"
    raise ContractError(f"the script's output has no {wanted} (the spec's metric:); {printed}; {fix}; its last lines: {last}")


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
    kept: tuple[deque[str], deque[str]],
    log: Any,
    reader: MetricReader,
) -> None:
    """Both streams are read for metrics (Python's logging writes to stderr); stderr's end is kept for errors."""
    tail, recent = kept
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
        if line.strip():
            recent.append(line.rsplit("\r", 1)[-1][:200])
        reader.line(line)
    proc.wait()
    reader.end()


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


def _failure(argv: list[str], code: int, tail: list[str], config: dict[str, Any], command: Command) -> CommandFailed:
    """The script's own last line, and which flag style would pass what it expects when that is the trouble."""
    last = next((line.strip() for line in reversed(tail) if line.strip()), "")
    details = f"command: {shlex.join(argv)}\nexit status: {code}\nlast stderr lines:\n" + "\n".join(tail) + "\n"
    found = (style_hint(tail, config, command.flags) or workdir_hint(tail, command)) if code > 0 else None
    hint = found[1] if found else None
    last = found[0] if found else last  # the line that says what is wrong with the arguments
    if code == 2 and "unrecognized arguments" in last:
        advice = hint or "add them to its argument parser, or drop them from the spec's space/fixed"
        return CommandFailed(f"the script rejects flags the config passes ({last}): {advice}", details)
    if code < 0:
        return CommandFailed(f"command killed by signal {-code}" + (f": {last}" if last else ""), details)
    return CommandFailed(f"command exited with status {code}" + (f": {last}" if last else "") + (f" ({hint})" if hint else ""), details)
