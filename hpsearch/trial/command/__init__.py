"""A training script run as a command: an ordinary ``fn(config, reporter)`` objective.

``options`` (what the spec says), ``argv`` (the config as flags), ``metrics`` (the output as
reports), ``runner`` (the process itself).
"""

from __future__ import annotations

from hpsearch.trial.command.argv import flags
from hpsearch.trial.command.metrics import MetricReader
from hpsearch.trial.command.options import FINAL_KEY, PREFIX, Command, describe, from_entry, parse_mapping
from hpsearch.trial.command.runner import CommandFailed, make_objective, run_command

__all__ = [
    "FINAL_KEY",
    "PREFIX",
    "Command",
    "CommandFailed",
    "MetricReader",
    "describe",
    "flags",
    "from_entry",
    "make_objective",
    "parse_mapping",
    "run_command",
]
