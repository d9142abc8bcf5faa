"""``hpsearch init -o search.yaml -- python train.py [args]``: a starter spec written from the script itself.

It runs the script's ``--help`` (helptext.py reads argparse, click, typer and Hydra), and with
``--probe S`` the script itself for S seconds, read as a trial would be (which metrics, which
step). The spec it writes: the flag style the help shows, the flags as ``fixed:`` at their
defaults, search ranges for names it recognises, the metric the probe saw with a direction
guessed from its name. Every choice is a comment in the file.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import yaml

from hpsearch.base.errors import UserError
from hpsearch.tools.helptext import Help, parse_help
from hpsearch.tools.init_probe import probe, runnable
from hpsearch.tools.init_write import spec_text

HELP_TIMEOUT_S = 60.0


def read_help(argv: list[str], cwd: Path) -> tuple[Help, str]:
    """The script's options from ``ARGV --help``, and its text (for messages)."""
    try:
        done = subprocess.run(runnable(argv) + ["--help"], cwd=cwd, capture_output=True, text=True, timeout=HELP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot run {shlex.join(argv)} --help: {exc}") from None
    text = done.stdout + "\n" + done.stderr
    found = parse_help(text)
    if not found.options and found.hydra is None:
        last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "(no output)")
        print(f"init: {shlex.join(argv)} --help listed no options (exit status {done.returncode}: {last}); the spec lists none")
    return found, text


def init(command: list[str], out: Path, force: bool = False, probe_s: float | None = None) -> str:
    """Write the starter spec; the message names what was found and the next command."""
    if not command:
        raise UserError("init: give the command after --, e.g. hpsearch init -o search.yaml -- python train.py")
    if out.exists() and not force:
        raise UserError(f"{out} exists; pass --force to overwrite it, or -o another file")
    cwd = Path.cwd()
    argv = [_relative(a, cwd, out.resolve().parent) for a in command]
    found, _ = read_help(command, cwd)
    probed = probe(command, cwd, probe_s) if probe_s else None
    text, summary = spec_text(argv, found, probed, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    yaml.safe_load(text)  # the file we wrote is YAML, whatever the script's help said
    return f"wrote {out}: {summary}\nnext: hpsearch validate {shlex.quote(str(out))}   # then: hpsearch run {shlex.quote(str(out))}"


def _relative(arg: str, cwd: Path, spec_dir: Path) -> str:
    """A path in the command, relative to where init runs, as the spec's folder sees it."""
    if arg.startswith("-") or os.path.isabs(arg) or not (cwd / arg).exists() or cwd.resolve() == spec_dir:
        return arg
    return os.path.relpath(cwd / arg, spec_dir)
