"""Which ``objective.flags`` setting would fix a script's refusal of its arguments.

A wrong flag style fails the trial with the script's own last line (argparse, a nanoGPT-style
configurator, Hydra); this adds, in brackets, the style option that passes what the script
expects. Nothing here is certain: the hint says "if" where the script's line does not tell.
``workdir_hint`` does the same for a file the script opens by a path relative to the spec's folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hpsearch.trial.command.argv import BOOL_TEXT
from hpsearch.trial.command.options import Command
from hpsearch.trial.command.style import FlagStyle

ARGUMENT = re.compile(r"argument (\S+?):")
UNRECOGNIZED = re.compile(r"unrecognized arguments?: (.*)$")
HYDRA_MISSING = re.compile(r"Could not override '([^']+)'")
YACS_MISSING = re.compile(r"Non-existent config key: ([\w.]+)")
NOT_FOUND = re.compile(r"No such file or directory: '([^'/][^']*)'|can't open file '([^'/][^']*)'")
HYDRA_EXISTS = re.compile(r"(?:already at '([^']+)'|Could not append to config\. An item is already at '([^']+)')")


def _recent(tail: list[str]) -> list[str]:
    """The script's last 10 non-blank lines, the last first: where it says what it refused."""
    return [t.strip() for t in reversed(tail[-10:]) if t.strip()]


def _passed(config: dict[str, Any], style: FlagStyle) -> dict[str, str]:
    """The name each config key is passed under (``--tied``, ``optimizer.lr``) -> the key."""
    return {style.key(k)[0].lstrip("+"): k for k in config if not k.startswith("_")}


def _key_option(key: str, setting: str) -> str:
    return f"objective.flags.keys.{key}.{setting}"


def style_hint(tail: list[str], config: dict[str, Any], style: FlagStyle) -> tuple[str, str] | None:
    """(the script's line about its arguments, the hint), from its last stderr lines (Hydra's
    explanation comes above a last line about HYDRA_FULL_ERROR), or None."""
    names = _passed(config, style)
    for line in _recent(tail):
        for rule in (_no_value, _needs_value, _unrecognized, _hydra, _boolean_text):
            hint = rule(line, config, style, names)
            if hint:
                return line, hint
    return None


def _no_value(last: str, config: dict[str, Any], style: FlagStyle, names: dict[str, str]) -> str | None:
    m = ARGUMENT.search(last)
    if "ignored explicit argument" not in last or m is None:
        return None
    flag = m.group(1).split("/")[0]
    key = names.get(flag, flag.lstrip("-").replace("-", "_"))
    return (
        f"{flag} takes no value: set objective.flags.booleans: store_true, or {_key_option(key, 'booleans')}: store_true for this key alone"
    )


def _needs_value(last: str, config: dict[str, Any], style: FlagStyle, names: dict[str, str]) -> str | None:
    m = ARGUMENT.search(last)
    if "expected one argument" not in last or m is None:
        return None
    flag = next((f for f in m.group(1).split("/") if f in names), m.group(1))
    key = names.get(flag)
    if key is None or not isinstance(config.get(key), bool):
        return None
    return f"{flag} takes a value: set {_key_option(key, 'booleans')}: json (true/false), python (True/False) or int (1/0)"


def _unrecognized(last: str, config: dict[str, Any], style: FlagStyle, names: dict[str, str]) -> str | None:
    m = UNRECOGNIZED.search(last)
    if m is None:
        return None
    words = m.group(1).split()
    if any(w in ("true", "false", "True", "False") for w in words) or any(w.startswith("--no-") for w in words):
        return "a flag of the script takes no value: set objective.flags.booleans: store_true (or per key under objective.flags.keys)"
    flags = [w.split("=", 1)[0] for w in words if w.startswith("--")]
    if any("_" in f for f in flags) and style.names == "keep":
        return f"if the script spells it {flags[0].replace('_', '-')}: set objective.flags.names: dashes"
    if any("-" in f[2:] for f in flags) and style.names == "dashes":
        return f"if the script spells it {flags[0].replace('-', '_').replace('__', '--', 1)}: set objective.flags.names: keep"
    if words and all("=" in w and not w.startswith("-") for w in words):
        return "the script takes --name=value flags, not name=value overrides: set objective.flags.form: equals"
    if flags and style.form != "hydra" and any("." in f for f in flags):
        return "if the script takes Hydra overrides (name=value): set objective.flags.form: hydra"
    return None


def _hydra(last: str, config: dict[str, Any], style: FlagStyle, names: dict[str, str]) -> str | None:
    missing = HYDRA_MISSING.search(last)
    if missing is not None:
        name = missing.group(1)
        key = names.get(name, name)
        return f"{name} is not in the script's config: set {_key_option(key, 'new')}: true to pass +{name}=..."
    absent = YACS_MISSING.search(last)
    if absent is not None:
        name = absent.group(1)
        return f"{name} is not in the script's config: set {_key_option(names.get(name, name), 'name')} to its path there"
    exists = HYDRA_EXISTS.search(last)
    if exists is not None:
        name = exists.group(1) or exists.group(2)
        return f"{name} is in the script's config already: drop {_key_option(names.get(name, name), 'new')}"
    if style.form != "hydra" and "override" in last.lower() and "--" in last:
        return "the script takes Hydra overrides (name=value): set objective.flags.form: hydra"
    return None


def _boolean_text(last: str, config: dict[str, Any], style: FlagStyle, names: dict[str, str]) -> str | None:
    """A script that quotes the boolean it was given (``type mismatch for compile: 'false'``)."""
    booleans = [k for k, v in config.items() if isinstance(v, bool) and not k.startswith("_")]
    for key in booleans:
        kind = style.key(key)[1]
        if kind not in BOOL_TEXT:
            continue
        texts = BOOL_TEXT[kind]
        if not any(f"'{t}'" in last or f'"{t}"' in last or f"vs. {t})" in last for t in texts):  # yacs: (False vs. true)
            continue
        others = [k for k in ("python", "json", "int") if k != kind]
        where = key if any(n in last for n in (key, key.replace("_", "-"), style.key(key)[0])) else None
        option = _key_option(where, "booleans") if where else "objective.flags.booleans"
        texts_of = {"python": "True/False", "json": "true/false", "int": "1/0"}
        choices = " or ".join(f"{k} ({texts_of[k]})" for k in others)
        return f"the script does not read {texts[0]}/{texts[1]}: set {option}: {choices}, or store_true for a flag without a value"
    return None


def workdir_hint(tail: list[str], command: Command) -> tuple[str, str] | None:
    """A relative path the script opens by default (YOLOv5's data/hyps/...) exists in the spec's folder, but
    with ``workdir: trial`` the script runs in the trial's own: say how to pass it."""
    if command.workdir != "trial":
        return None
    for line in _recent(tail):
        m = NOT_FOUND.search(line)
        path = m and (m.group(1) or m.group(2))
        if path and (Path(command.cwd) / path).exists():
            return line, f"{path} is in the spec's folder, the trial runs in its own (workdir: trial): pass it in the command or fixed:"
    return None
