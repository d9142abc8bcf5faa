"""A training script run as a command becomes an ordinary ``fn(config, reporter)`` objective.

The spec says ``objective: {command: "python train.py --epochs 10"}``; the loader turns that into
one entry string (``command:{json}``, with the spec's folder as the working folder) so that every
layer above stores, exports and ships it like ``module:function``. Per trial the adapter:

- appends one ``--name=value`` flag per config key (keys starting with ``_`` are engine settings);
- sets HPSEARCH_TRIAL_DIR, HPSEARCH_CHECKPOINT, HPSEARCH_TB_DIR, HPSEARCH_FINAL and HPSEARCH_CONFIG;
- reads metrics live from stdout (JSON lines or ``name=value`` pairs) or from the TensorBoard
  scalars the script writes, and hands every epoch to ``reporter.report`` (pruning, curves, history);
- ends the process group (SIGTERM, SIGKILL after ``grace_s``) when the reporter stops the trial;
- raises CommandFailed with the last stderr lines when the script exits non-zero.

See docs/your-code.md for the user's side.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "command:"  # an objective entry that starts so is a command (what the loader makes of {command: ...})
FINAL_KEY = "_final"  # True in the config under `hpsearch train` (the final run), absent in search trials

FORMATS = ("auto", "json", "kv", "tensorboard")
# name=value or name: value; value a number, nan or inf. Names may hold / and . (val/acc, top1.acc).
KV_PATTERN = r"(?P<name>[A-Za-z_][\w/.\-]*)\s*[=:]\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)\b"
EPOCH_WORD = re.compile(r"\bepoch\s*[=: ]\s*(\d+)", re.IGNORECASE)
STDERR_LINES = 30  # kept for error.txt and the reason of a failed trial
POLL_S = 0.5  # how often TensorBoard event files are read (seconds)
KEYS = {"command", "metrics", "pattern", "grace_s"}


@dataclass(frozen=True)
class Command:
    argv: list[str]
    cwd: str  # absolute: the spec's folder; relative paths in argv are relative to it
    metrics: str = "auto"  # auto (JSON lines, else name=value) | json | kv | tensorboard
    pattern: str = KV_PATTERN  # regex with groups name and value, for kv/auto
    grace_s: float = 10.0  # seconds between SIGTERM and SIGKILL when a trial is pruned
    env: dict[str, str] = field(default_factory=dict)


class CommandFailed(RuntimeError):
    """The script exited non-zero. ``details`` (error.txt) holds the command and its last stderr lines."""

    def __init__(self, reason: str, details: str):
        super().__init__(reason)
        self.details = details
        self.frames: list[Any] = []  # no Python frame of the user's to point at


def parse_mapping(value: Any, base_dir: Path) -> tuple[str | None, list[str]]:
    """The spec's ``objective: {command: ...}`` as an entry string, or problems (``key: reason``)."""
    if not isinstance(value, dict):
        return None, ["objective: must be 'module:function', 'file.py:function' or {command: ...}"]
    problems = [f"objective.{k}: unknown key (known: {', '.join(sorted(KEYS))})" for k in value if k not in KEYS]
    raw = value.get("command")
    argv: list[str] = []
    if isinstance(raw, str):
        try:
            argv = shlex.split(raw)
        except ValueError as exc:
            problems.append(f"objective.command: cannot split {raw!r}: {exc}")
    elif isinstance(raw, list) and all(isinstance(a, str | int | float) for a in raw):
        argv = [str(a) for a in raw]
    else:
        problems.append("objective.command: must be a string or a list of strings, e.g. 'python train.py --epochs 10'")
    if not argv and not problems:
        problems.append("objective.command: is empty")
    fmt = value.get("metrics", "auto")
    if fmt not in FORMATS:
        problems.append(f"objective.metrics: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    pattern = value.get("pattern", KV_PATTERN)
    try:
        groups = re.compile(pattern).groupindex if isinstance(pattern, str) else {}
        if not {"name", "value"} <= set(groups):
            problems.append("objective.pattern: needs groups (?P<name>...) and (?P<value>...)")
    except re.error as exc:
        problems.append(f"objective.pattern: not a regular expression: {exc}")
    grace = value.get("grace_s", 10.0)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace <= 3600:
        problems.append(f"objective.grace_s: must be seconds between 0 and 3600, got {grace!r}")
    if problems:
        return None, problems
    command = Command(argv, str(base_dir.resolve()), str(fmt), str(pattern), float(grace))
    defaults = Command([], "")
    short = {k: v for k, v in asdict(command).items() if k in ("argv", "cwd") or v != getattr(defaults, k)}
    return PREFIX + json.dumps(short), []  # only what differs from the defaults: stored per study, shown by validate


def from_entry(entry: str) -> Command:
    data = json.loads(entry[len(PREFIX) :])
    return Command(**data)


def describe(entry: str) -> str:
    """The command as a user would type it (progress lines, describe)."""
    if not entry.startswith(PREFIX):
        return entry
    command = from_entry(entry)
    return f"{shlex.join(command.argv)} (in {command.cwd})"


def flags(config: dict[str, Any]) -> list[str]:
    """One ``--name=value`` per config key; the space's config is flat, so a conditional choice gives
    ``--optimizer=sgd --lr=0.1 --momentum=0.9`` (only the chosen option's parameters)."""
    out = []
    for name, value in config.items():
        if name.startswith("_") or value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list | dict):
            text = json.dumps(value)
        else:
            text = str(value)
        out.append(f"--{name}={text}")
    return out


def make_objective(command: Command) -> Any:
    def objective(config: dict[str, Any], reporter: Any) -> dict[str, float]:
        return run_command(command, config, reporter)

    objective.command = command  # type: ignore[attr-defined]
    return objective


def environment(command: Command, config: dict[str, Any], reporter: Any) -> dict[str, str]:
    trial_dir = Path(reporter.trial_dir) if getattr(reporter, "trial_dir", None) is not None else Path(command.cwd)
    checkpoint = getattr(reporter, "checkpoint_path", None)
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


def _adopt_dead_checkpoint(reporter: Any) -> None:
    """A dead trial's checkpoint (``reporter.resume_from``) becomes ours, so the script finds it at HPSEARCH_CHECKPOINT."""
    own, other = getattr(reporter, "checkpoint_path", None), getattr(reporter, "resume_from", None)
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


def run_command(command: Command, config: dict[str, Any], reporter: Any) -> dict[str, float]:
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


class MetricReader:
    """Turns the script's output into ``reporter.report`` calls; remembers the final metrics."""

    def __init__(self, command: Command, tb_dir: Path, reporter: Any):
        self.command, self.tb_dir, self.reporter = command, tb_dir, reporter
        self.pattern = re.compile(command.pattern)
        self.last: dict[str, float] = {}
        self.final_line: dict[str, float] | None = None
        self.tb_rows: dict[int, dict[str, float]] = {}
        self.tb_reported = 0  # the highest step handed to the reporter
        self.tb_offsets: dict[Path, int] = {}

    def line(self, text: str) -> None:
        fmt = self.command.metrics
        if fmt == "tensorboard":
            return
        stripped = text.strip()
        if fmt in ("auto", "json") and stripped.startswith("{"):
            if self._json(stripped):
                return
        if fmt in ("auto", "kv"):
            self._kv(stripped)

    def _json(self, text: str) -> bool:
        try:
            data = json.loads(text)
        except ValueError:
            return False
        if not isinstance(data, dict):
            return False
        numbers = {k: float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        epoch = data.get("epoch")
        if isinstance(epoch, int) and not isinstance(epoch, bool) and not data.get("final"):
            numbers.pop("epoch", None)
            self._report(epoch, numbers)
        elif numbers:  # a line without an epoch (or with "final": true): the final metrics
            numbers.pop("epoch", None)
            self.final_line = numbers
        return True

    def _kv(self, text: str) -> None:
        pairs = {m["name"]: m["value"] for m in self.pattern.finditer(text)}
        epoch_text = next((v for k, v in pairs.items() if k.lower() == "epoch"), None)
        if epoch_text is None:
            found = EPOCH_WORD.search(text)
            epoch_text = found.group(1) if found else None
        try:
            epoch = int(float(epoch_text)) if epoch_text is not None else None
        except ValueError:
            epoch = None
        metrics = {k: float(v) for k, v in pairs.items() if k.lower() != "epoch"}
        if epoch is not None and metrics:  # lines without an epoch (settings, progress bars) are not reports
            self._report(epoch, metrics)

    def _report(self, epoch: int, metrics: dict[str, float]) -> None:
        self.last = {"epoch": float(epoch), **metrics}
        self.reporter.report(epoch, metrics)

    def poll_events(self, done: bool) -> None:
        """Read new scalars from the script's TensorBoard files; a step is reported once a later step
        appears (its scalars are all written), the last one when the script has exited."""
        if self.command.metrics != "tensorboard" or not self.tb_dir.is_dir():
            return
        for path in sorted(self.tb_dir.rglob("events.out.tfevents.*")):
            for step, tag, value in self._read_new(path):
                self.tb_rows.setdefault(step, {})[tag.replace("/", "_")] = value
        ready = sorted(s for s in self.tb_rows if s > self.tb_reported)
        finished = ready if done else ready[:-1]
        for step in finished:
            self._report(step, self.tb_rows[step])
            self.tb_reported = step

    def _read_new(self, path: Path) -> list[tuple[int, str, float]]:
        from tensorboard.compat.proto import event_pb2

        data = path.read_bytes()
        offset, out = self.tb_offsets.get(path, 0), []
        while offset + 12 <= len(data):
            length = int.from_bytes(data[offset : offset + 8], "little")
            end = offset + 12 + length + 4  # length, its crc, the record, its crc
            if end > len(data):
                break  # a record still being written
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            for value in event.summary.value:
                number = _scalar(value)
                if number is not None:
                    out.append((int(event.step), value.tag, number))
            offset = end
        self.tb_offsets[path] = offset
        return out

    def final(self) -> dict[str, float]:
        """The final JSON line when the script printed one, over the last report."""
        last = {k: v for k, v in self.last.items() if k != "epoch"}
        merged = {**last, **(self.final_line or {})}
        if "epochs" not in merged and "epoch" in self.last and math.isfinite(self.last["epoch"]):
            merged["epochs"] = self.last["epoch"]
        return merged


def _scalar(value: Any) -> float | None:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor") and value.tensor.float_val:  # torch's SummaryWriter writes simple_value; TF2 writes tensors
        return float(value.tensor.float_val[0])
    if value.HasField("tensor") and value.tensor.double_val:
        return float(value.tensor.double_val[0])
    return None
