"""A script's options, read from what its ``--help`` prints: argparse, click and typer (plain or
rich boxes), and Hydra's ``== Config ==`` section.

Per option: the long flag as written, the config key (``--batch-size`` -> ``batch_size``),
whether it takes a value, a ``--no-`` partner, the default and type where the help shows them.
argparse shows defaults only with ``ArgumentDefaultsHelpFormatter`` or ``%(default)s`` in a help
string, click with ``show_default``; an option without one is listed without a value.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

TYPES = {"INTEGER": "int", "INT": "int", "FLOAT": "float", "TEXT": "str", "STR": "str", "BOOLEAN": "bool", "BOOL": "bool", "PATH": "str"}
TYPES.update({"FILE": "str", "DIRECTORY": "str", "FILENAME": "str", "UUID": "str", "DATETIME": "str"})
SKIP = {"help", "version", "install_completion", "show_completion"}
BOX = re.compile(r"[│╭╰─╮╯┃┏┗━┓┛]")
FLAG = re.compile(r"--?[A-Za-z0-9][\w\-.]*")
DEFAULT = re.compile(r"[(\[]default:\s*(.*?)[)\]](?:\s|$)")
NO_DEFAULT = object()


@dataclass
class Option:
    flag: str  # the long flag as written: --batch-size
    key: str  # the config key: batch_size
    takes_value: bool = True
    negatable: bool = False  # --x / --no-x
    default: Any = NO_DEFAULT
    type: str | None = None  # int | float | str | bool
    choices: list[str] = field(default_factory=list)
    help: str = ""

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass
class Help:
    options: list[Option]
    hydra: dict[str, Any] | None = None  # a Hydra app's composed config (its --help prints it)


def parse_help(text: str) -> Help:
    hydra = _hydra_config(text)
    if hydra is not None:
        return Help([], hydra)
    options: list[Option] = []
    current: Option | None = None
    for raw in text.splitlines():
        line = BOX.sub(" ", raw).rstrip()
        stripped = line.strip()
        if stripped.startswith("-"):
            current = _option(stripped)
            if current is not None:
                options.append(current)
        elif current is not None and stripped and raw.startswith((" ", "│", "┃")):
            current.help = f"{current.help} {stripped}".strip()  # a wrapped help line
            _read_default(current)
        else:
            current = None
    return Help([o for o in options if o.key not in SKIP])


TOKEN = re.compile(r"\{[^}]*\}|\[[^\]]*\]|/|,|[^\s,]+")


def _option(text: str) -> Option | None:
    """One option line: its flags, a metavar or type, then the help after them."""
    flags: list[str] = []
    metavar: str | None = None
    rest, end = "", 0
    for m in TOKEN.finditer(text):
        token, gap = m.group(0), text[end : m.start()]
        name, eq, value = token.partition("=")
        if token in ("/", ",") or (token == metavar and flags):  # argparse repeats the metavar per flag
            pass
        elif FLAG.fullmatch(name):
            flags.append(name)
            metavar = value if eq else metavar
        elif flags and metavar is None and _is_metavar(token, gap):
            metavar = token
        elif not (token == "RANGE" and metavar in ("INTEGER", "FLOAT")):  # click's INTEGER RANGE
            rest = text[m.start() :]
            break
        end = m.end()
    longs = [f for f in flags if f.startswith("--")]
    if not longs:
        return None
    positive = next((f for f in longs if not f.startswith("--no-")), longs[0])
    option = Option(positive, positive[2:].replace("-", "_").replace(".", "_"), help=rest.strip())
    option.negatable = not positive.startswith("--no-") and "--no-" + positive[2:] in longs
    option.takes_value = metavar is not None
    if not option.takes_value and not option.negatable:
        option.default = False  # a flag without a value is off unless given
    _read_type(option, metavar)
    _read_default(option)
    return option


def _is_metavar(token: str, before: str) -> bool:
    """argparse's ``EPOCHS``, ``[FP16]`` (an optional value, nargs='?') or ``{sgd,adam}`` one space after
    its flag; click's and typer's type names (``FLOAT``, ``[sgd|adam]``) in any column."""
    if token.strip("[]<>").upper() in TYPES or re.fullmatch(r"\{[^}]*\}|\[[^\]]*\|[^\]]*\]", token):
        return True
    return before == " " and re.fullmatch(r"[A-Z][A-Z0-9_\-]*|\[[A-Z][A-Z0-9_\-]*\]", token) is not None


def _read_type(option: Option, metavar: str | None) -> None:
    if metavar is None:
        option.type = "bool"
        return
    choices = re.fullmatch(r"\{([^}]*)\}|\[([^\]]*\|[^\]]*)\]", metavar)
    if choices:
        option.choices = [c.strip() for c in re.split(r"[,|]", choices.group(1) or choices.group(2)) if c.strip()]
        option.type = "str"
        return
    option.type = TYPES.get(metavar.strip("[]<>").upper())


def _read_default(option: Option) -> None:
    found = DEFAULT.search(option.help)
    if found is None:
        return
    text = found.group(1).split(";")[0].strip()  # click: [default: 100; x>=0]
    if option.negatable or not option.takes_value:
        bare = option.flag[2:]
        option.default = {bare: True, "no-" + bare: False, "True": True, "False": False, "true": True, "false": False}.get(text, False)
        return
    option.default = literal(text)
    if option.default is None:
        option.default = NO_DEFAULT  # None: the script decides; nothing to pass
    if option.type is None and option.default is not NO_DEFAULT:
        option.type = type(option.default).__name__ if isinstance(option.default, bool | int | float | str) else None


def literal(text: str) -> Any:
    """A default as printed: a number, True/False/None, a quoted or bare string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _hydra_config(text: str) -> dict[str, Any] | None:
    """A Hydra app's ``--help`` prints its composed config between ``== Config ==`` and ``Powered by Hydra``."""
    if "== Config ==" not in text:
        return None
    body = text.split("== Config ==", 1)[1]
    body = re.split(r"^\s*Powered by Hydra.*$|^== ", body, maxsplit=1, flags=re.M)[0]
    lines = [line for line in body.splitlines() if not line.startswith(("Override anything", "Use --"))]
    try:
        data = yaml.safe_load("\n".join(lines))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None
