"""One printed line as metrics and a step: what ``metrics: auto`` (and ``kv``, ``json``, regexes) read.

``auto`` reads, in this order:

- a **JSON object** or a **Python dict repr** (``{'eval_loss': 0.41, 'epoch': 1.0}``, parsed
  without evaluating anything); its step is the key ``epoch``, ``step``, ``global_step``,
  ``iteration`` or ``iter`` (the first of these it has); without one it holds the final metrics;
- else **pieces**: the line split at ``|``, ``,``, `` - ``, ``;`` and tabs; in each piece
  ``name=value``, ``name: value`` and ``words value`` (``valid loss 6.12``) give metrics. A one-word
  name keeps its spelling (``val_acc``, ``Loss``, ``val/acc``); several words, or other
  characters, become snake_case (``valid_loss``, ``Acc@1`` -> ``acc_1``). Units after a number
  are dropped (``3.21s``, ``99%``); ``9891/10000`` is the fraction 0.9891.

A **table** (a header of names with a step key over rows of numbers, as fastai prints its epochs)
is read by ``Table``, which keeps the header for the rows below it.

The step of a line is its first ``epoch N``, ``Epoch N/M``, ``Epoch [N/M]``, ``step N``, ``iter N``,
``iteration N``, ``it N`` or ``global_step=N``. A line that shows a position inside its step
(``200/2983 batches``, ``[0/60000 (0%)]``, ``Step [100/600]``, a fractional epoch ``0.53``) is
``inside``: its metrics wait for the step's report. Progress bars (tqdm, Keras' ``ETA:``, text
before a carriage return) are nothing.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

LONGEST = 2000  # characters: a longer line (a printed tensor, a config dump) is no report, and not worth the regexes
STEP_KEYS = ("epoch", "step", "global_step", "iteration", "iter")  # in dicts and CSV columns, first found wins
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)(?![a-z])"
STEP = re.compile(
    r"(?<![\w.])(?P<word>global_step|epoch|step|iteration|iter|it)(?![\w])\s*[:=#]?\s*\[?\s*"
    r"(?P<n>\d+(?:\.\d+)?)(?:\s*/\s*(?P<of>\d+))?\s*\]?",
    re.IGNORECASE,
)
WORD = r"[A-Za-z][\w@/.\-]*[\w@]|[A-Za-z]"
PAIR = re.compile(
    rf"(?<![\w@/.\-])(?P<words>(?:{WORD})(?:[ ]+(?:{WORD})){{0,3}})(?P<sep>\s*[:=]\s*|\s+)"
    rf"(?:(?P<num>\d+)/(?P<den>\d+)(?![\d/.])|(?P<value>{NUMBER}))(?P<unit>%|[A-Za-zµ]{{1,3}}(?:/[A-Za-z]{{1,4}})?)?(?![\w.:])",
    re.IGNORECASE,
)
COUNT = re.compile(r"(?<![\d/.])(\d+)\s*/\s*(\d+)(?![\d/])")  # n/N left over in a line: a position inside a step
IDENTIFIER = re.compile(r"[A-Za-z_][\w/.\-]*")  # names kept as printed (what `name=value` always had)
LETTER = re.compile(r"[A-Za-z]")
TABLE_NAME = re.compile(r"[A-Za-z_][\w/.@\-]*")  # a column of a printed table
SPLIT = re.compile(r"\s*(?:\||,|;|\t|\s-\s)\s*")
BAR = re.compile(r"\d+%\|| ETA: |\[\d+:\d+<|━{3}|\|\s*\d+/\d+\s*\[\d+:\d+")
NOISE = re.compile(r'^\s*(?:File "|Traceback \()|\b[A-Z]\w*(?:Warning|Error|Exception): ')  # tracebacks and warnings are not reports


@dataclass
class Line:
    metrics: dict[str, float] = field(default_factory=dict)
    step: int | None = None
    inside: bool = False  # a position inside the step: its metrics wait for the step's report
    final: bool = False  # a JSON or dict line without a step: the final metrics


def visible(text: str) -> str | None:
    """What a terminal would show of the line (after its last carriage return); None for a progress bar."""
    shown = text.rstrip("\r\n").rsplit("\r", 1)[-1]
    return None if BAR.search(shown) else shown


def snake(words: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", words.lower()).strip("_")


def metric_name(words: str) -> str:
    return words if IDENTIFIER.fullmatch(words) else snake(words)


def step_of(value: float) -> tuple[int, bool]:
    """(the step, whether the value lies inside it): epoch 0.53 is inside step 1."""
    whole = math.ceil(value)
    return whole, whole != value


def read_auto(text: str) -> Line | None:
    shown = visible(text)
    if shown is None or NOISE.search(shown):
        return None
    found = read_dict(shown)
    if found is not None or len(shown) > LONGEST:
        return found
    return read_pieces(shown)


class Table:
    """A header of names over rows of numbers, as fastai prints its epochs::

        epoch     train_loss  valid_loss  accuracy  time
        0         0.520392    0.353110    0.858000  00:12

    A header is 3 or more names, one of them a step key; a row has as many cells, none of them a
    word, a whole number in the step's column, and numbers for metrics (``00:12`` is none). The
    header holds for the rows below it until another header comes."""

    def __init__(self) -> None:
        self.names: list[str] | None = None
        self.step_at = 0

    def read(self, shown: str) -> Line | None:
        cells = shown.split()
        if len(cells) >= 3 and all(TABLE_NAME.fullmatch(c) for c in cells):
            at = next((i for i, c in enumerate(cells) if c.lower() in STEP_KEYS), None)
            if at is not None:
                self.names, self.step_at = cells, at
            return None
        if self.names is None or len(cells) != len(self.names):
            return None
        if any(_number(c) is None and LETTER.search(c) for c in cells):
            return None  # a word in a cell: prose that read_auto reads by its own names (`loss 0.52 epoch 3`)
        step = _number(cells[self.step_at])
        metrics = {
            metric_name(n): v
            for i, (n, c) in enumerate(zip(self.names, cells, strict=True))
            if i != self.step_at and (v := _number(c)) is not None
        }
        if step is None or not step.is_integer() or not metrics:
            return None
        return Line(metrics, int(step))

    @property
    def unit(self) -> str:
        return f"the '{self.names[self.step_at]}' column" if self.names else "a table"


def read_pieces(text: str, pairs: re.Pattern[str] | None = None) -> Line:
    """Step words and metric pieces. ``pairs``: a user's name/value regex instead of the pieces."""
    line, rest = _steps(text)
    if pairs is not None:
        for m in pairs.finditer(rest):
            number = _number(m["value"])
            if number is not None and m["name"].lower() not in STEP_KEYS:
                line.metrics[m["name"]] = number
        return line
    for piece in SPLIT.split(rest):
        left = piece
        for m in PAIR.finditer(piece):
            value = _pair_value(m)
            if value is not None:
                line.metrics[metric_name(m["words"])] = value
                left = left.replace(m.group(0), " ", 1)
        line.inside |= any(int(n) < int(of) for n, of in COUNT.findall(left))
    return line


def _steps(text: str) -> tuple[Line, str]:
    """The line's step (its first step word) and the text without its step words."""
    line = Line()
    for i, m in enumerate(STEP.finditer(text)):
        n, of = float(m["n"]), m["of"]
        if i == 0:
            line.step, line.inside = step_of(n)
        elif of is not None and n < int(of):
            line.inside = True  # Epoch [1/5], Step [100/600]: the second is a position inside the epoch
    return line, STEP.sub(" | ", text)


def _pair_value(m: re.Match[str]) -> float | None:
    if m["num"] is not None:
        den = int(m["den"])
        return int(m["num"]) / den if den else None
    return _number(m["value"])


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def read_dict(text: str) -> Line | None:
    """A line that is a JSON object or a Python dict repr, else None (a printed ``config: {...}`` is not one)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    data = json_object(body)
    if data is None:
        data = _literal(body)
    if data is None:
        return None
    return from_mapping(data)


def from_mapping(data: dict[str, Any]) -> Line:
    numbers = {str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    key = next((k for k in STEP_KEYS if k in numbers and math.isfinite(numbers[k])), None)
    if key is None or data.get("final") is True:
        return Line({k: v for k, v in numbers.items() if k not in STEP_KEYS}, final=True)
    step, inside = step_of(numbers[key])
    return Line({k: v for k, v in numbers.items() if k not in STEP_KEYS}, step, inside)


def json_object(body: str) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _literal(body: str) -> dict[str, Any] | None:
    """A Python dict repr, read from its syntax tree (never evaluated): constant keys, number values;
    ``nan``/``inf`` and ``-x`` are numbers too, anything else (``tensor(0.5)``) is left out."""
    if len(body) > 100_000:
        return None
    try:
        tree = ast.parse(body, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(tree, ast.Dict):
        return None
    out: dict[str, Any] = {}
    for k, v in zip(tree.keys, tree.values, strict=True):
        if isinstance(k, ast.Constant) and isinstance(k.value, str):
            value = _constant(v)
            if value is not None:
                out[k.value] = value
    return out


def _constant(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | bool | str):
        return node.value
    if isinstance(node, ast.Name) and node.id in ("nan", "inf"):
        return float(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _constant(node.operand)
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def read_regexes(text: str, regexes: dict[str, re.Pattern[str]]) -> Line | None:
    """``metrics: {val_loss: 'val loss ([\\d.]+)'}``: each metric from its own regex (group ``value``,
    else the first group); the step from the line's step words, or the step above it."""
    shown = visible(text)
    if shown is None:
        return None
    line, _ = _steps(shown)
    for name, regex in regexes.items():
        m = regex.search(shown)
        if m is not None:
            number = _number(m.groupdict().get("value") or (m.group(1) if regex.groups else m.group(0)))
            if number is not None:
                line.metrics[name] = number
    return line
