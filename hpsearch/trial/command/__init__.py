"""A training script run as a command: an ordinary ``fn(config, reporter)`` objective.

``options`` (what the spec says), ``style`` and ``argv`` (the config as arguments), ``lines`` (a
printed line as metrics and a step), ``logs`` (TensorBoard and CSV files), ``metrics`` (the
output as per-step reports), ``hints`` (the flag style a refusal asks for), ``runner`` (the process).
"""

from __future__ import annotations

from hpsearch.trial.command.argv import flags
from hpsearch.trial.command.metrics import MetricReader
from hpsearch.trial.command.options import FINAL_KEY, PREFIX, Command, describe, from_entry, parse_mapping
from hpsearch.trial.command.runner import CommandFailed, make_objective, run_command, trial_argv
from hpsearch.trial.command.style import FlagStyle, KeyStyle

__all__ = [
    "FINAL_KEY",
    "PREFIX",
    "Command",
    "CommandFailed",
    "FlagStyle",
    "KeyStyle",
    "MetricReader",
    "describe",
    "flags",
    "from_entry",
    "make_objective",
    "parse_mapping",
    "run_command",
    "trial_argv",
]
