"""``hpsearch init --probe S``: run the script as it is for S seconds and read its output as a
trial's (trial/command/): which metrics it prints, in which step, and which metric to search."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from hpsearch.tools.init_logs import SeenLog, snapshot, written

LOWER = re.compile(r"loss|err|ppl|perplexity|mae|mse|rmse|wer|cer|nll|bpc|bpb|time|fid")
HIGHER = re.compile(r"acc|f1|auc|precision|recall|map|iou|dice|bleu|rouge|score|top|r2|psnr|ssim")
HELD_OUT = re.compile(r"^(val|valid|validation|eval|dev|test)|_(val|valid|eval|test)_|average")


@dataclass
class Probe:
    seconds: float
    reports: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    final: dict[str, float] = field(default_factory=dict)
    unit: str | None = None  # 'epoch N', 'step N'...
    exit: str | None = None  # how it ended before the time was up, if it did
    seen: set[str] = field(default_factory=set)  # every metric read: HF's eval dict follows its train dict at one epoch
    log: SeenLog | None = None  # the log file it wrote with the most steps (init_logs.py)

    def names(self) -> list[str]:
        return sorted({k for _, m in self.reports for k in m} | set(self.final) | self.seen)


def runnable(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """As a trial starts it: ``python`` is hpsearch's interpreter, ``$HPSEARCH_X`` the probe's value."""
    from hpsearch.trial.command.argv import expand

    words = [expand(a, env or {}) for a in argv]
    return [sys.executable, *words[1:]] if words and words[0] in ("python", "python3") else words


def probe(argv: list[str], cwd: Path, seconds: float) -> Probe:
    """Run the command as it is for ``seconds`` (then end its process group) and read its output as a trial's."""
    from hpsearch.trial.command import MetricReader
    from hpsearch.trial.command.options import Command

    result = Probe(seconds)

    class Sink:
        trial_dir: Path | None = None
        checkpoint_path: Path | None = None
        resume_from: Path | None = None

        def report(self, step: int, metrics: dict[str, float]) -> None:
            result.reports.append((step, metrics))

    with tempfile.TemporaryDirectory(prefix="hpsearch-probe-") as folder:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "HPSEARCH_TRIAL_DIR": folder, "HPSEARCH_TB_DIR": f"{folder}/script_tb"}
        env.update(HPSEARCH_FINAL="0", HPSEARCH_CONFIG="{}", HPSEARCH_CHECKPOINT=f"{folder}/checkpoint.pt")  # a throw-away trial's
        reader = MetricReader(Command(argv, str(cwd)), Path(folder) / "script_tb", Sink())
        before = snapshot(cwd)
        proc = subprocess.Popen(
            runnable(argv, env), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        lines: list[str] = []  # both streams, each line whole, as a trial reads them (a bar on stderr ends without a newline)

        def read(stream: IO[str] | None) -> None:
            for line in stream or []:
                lines.append(line)

        readers = [threading.Thread(target=read, args=(stream,), daemon=True) for stream in (proc.stdout, proc.stderr)]
        for reader_thread in readers:
            reader_thread.start()
        readers[0].join(seconds)
        if readers[0].is_alive():  # still running at the deadline: enough seen
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elif proc.wait() != 0:
            last = next((line.strip() for line in reversed(lines) if line.strip()), "")
            result.exit = f"exited with status {proc.returncode}" + (f": {last}" if last else "")
        proc.wait()
        for reader_thread in readers:
            reader_thread.join(5)
        for line in list(lines):
            reader.line(line.rstrip("\n"))
        reader.steps.end()
    result.final, result.unit, result.seen = dict(reader.final_line or {}), reader.steps.unit, set(reader.found())
    result.log = written(cwd, before)
    return result


def pick_metric(names: list[str]) -> str | None:
    """A held-out loss, else a held-out metric, else a quality metric not of training (YOLOv5's
    ``metrics/mAP_0.5``), else any loss, else the first name."""
    held = [n for n in names if HELD_OUT.search(n.lower())]
    quality = [n for n in names if "train" not in n.lower() and HIGHER.search(n.lower()) and not LOWER.search(n.lower())]
    for group in (held, quality, names):
        losses = [n for n in group if "loss" in n.lower()]
        if losses:
            return losses[0]
        if group:
            return group[0]
    return None


def direction(metric: str) -> str:
    name = metric.lower()
    return "maximize" if HIGHER.search(name) and not LOWER.search(name) else "minimize"
