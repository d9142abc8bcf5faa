"""A trial's config as the script's command-line arguments, in the command's flag style (style.py).

The default, ``--name=value`` per key, is what every command got before styles existed. The
space's config is flat, so a conditional choice gives only the chosen option's parameters
(``--optimizer=sgd --lr=0.1 --momentum=0.9``). Keys starting with ``_`` (engine settings) and
keys whose value is None are never passed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from hpsearch.trial.command.style import DOTTED, FlagStyle

DEFAULT = FlagStyle()
BOOL_TEXT = {"json": ("false", "true"), "python": ("False", "True"), "int": ("0", "1")}
HYDRA_PLAIN = re.compile(r"[\w\-+./@%?*]+")  # a Hydra value that needs no quotes


def flags(config: dict[str, Any], style: FlagStyle = DEFAULT) -> list[str]:
    """The arguments for ``config``: one flag (or override) per key, in the config's order."""
    items = flattened(config) if style.form in DOTTED else [(k, v) for k, v in config.items()]
    out: list[str] = []
    for key, value in items:
        if key.startswith("_") or value is None:
            continue
        name, booleans, _ = style.key(key)
        if isinstance(value, bool) and booleans == "store_true":
            out += [name] if value else []
        elif isinstance(value, bool) and booleans == "negatable":
            out.append(name if value else _negated(name))
        elif style.form in ("space", "pairs"):
            out += [name, _text(value, booleans)]
        elif style.form == "hydra":
            out.append(f"{name}={_hydra(value, booleans)}")
        else:
            out.append(f"{name}={_text(value, booleans)}")
    return out


def _negated(name: str) -> str:
    """``--amp`` -> ``--no-amp`` (argparse's BooleanOptionalAction, click's ``--x/--no-x``)."""
    bare = name.lstrip("-")
    return name[: len(name) - len(bare)] + "no-" + bare


def _text(value: Any, booleans: str) -> str:
    if isinstance(value, bool):
        return BOOL_TEXT.get(booleans, BOOL_TEXT["json"])[value]
    if isinstance(value, list | dict):
        return repr(value) if booleans == "python" else json.dumps(value)  # python: read back with ast.literal_eval
    return str(value)


def _hydra(value: Any, booleans: str) -> str:
    """A value in Hydra's override grammar: strings quoted when they hold its special characters."""
    if isinstance(value, bool):
        return BOOL_TEXT.get(booleans, BOOL_TEXT["json"])[value]
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ",".join(_hydra(v, booleans) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_hydra(v, booleans)}" for k, v in value.items()) + "}"
    text = str(value)
    if isinstance(value, str) and not HYDRA_PLAIN.fullmatch(text):
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text


def flattened(config: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested mappings (``fixed: {trainer: {max_epochs: 10}}``) as dotted keys: ``trainer.max_epochs``."""
    out: list[tuple[str, Any]] = []
    for key, value in config.items():
        if not prefix and key.startswith("_"):
            continue
        if isinstance(value, dict) and value:
            out += flattened(value, f"{prefix}{key}.")
        else:
            out.append((prefix + key, value))
    return out


PATHLIKE = re.compile(r"/|^\.|\.\w{1,5}$")  # a config string taken for a path: data/, ./data, conf.yaml (not sgd, not a bare word)
VAR = re.compile(r"\$\{(HPSEARCH_\w+)\}|\$(HPSEARCH_\w+)")


def expand(arg: str, env: dict[str, str]) -> str:
    """``$HPSEARCH_CHECKPOINT`` or ``${HPSEARCH_TRIAL_DIR}`` in the command: the trial's value, so a
    script that takes ``--checkpoint PATH`` needs no change (other ``$`` text is left alone)."""
    return VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), arg)


def anchored(text: str, base: Path) -> str:
    """A relative path that names an existing file or folder in ``base`` (the spec's folder) as an
    absolute path; in ``--name=path`` the part after ``=``. Anything else as it was."""
    head, eq, tail = text.partition("=") if text.startswith("-") else ("", "", text)
    if not tail or tail.startswith(("/", "-", "$")) or "\n" in tail or len(tail) > 4096:
        return text
    try:
        found = (base / tail).exists()
    except OSError:
        return text
    return head + eq + str(base / tail) if found else text


def anchored_config(config: dict[str, Any], base: Path) -> dict[str, Any]:
    """The config's path-like strings that name something in ``base`` (the spec's folder) as absolute paths."""
    return {k: anchored(v, base) if isinstance(v, str) and PATHLIKE.search(v) else v for k, v in config.items()}


def command_line(argv: list[str], config: dict[str, Any], style: FlagStyle, env: dict[str, str], base: Path | None = None) -> list[str]:
    """The whole command of a trial. ``base``: the spec's folder when the trial runs elsewhere
    (``workdir: trial``): relative paths to things in it, in the command or the config's strings, are anchored there."""
    words = [expand(a, env) for a in argv]
    if base is not None:
        words = [words[0], *(anchored(w, base) for w in words[1:])]
        config = anchored_config(config, base)
    out = words + flags(config, style)
    if out and out[0] in ("python", "python3"):  # hpsearch's own interpreter (its venv), wherever PATH points
        out[0] = sys.executable
    return out
