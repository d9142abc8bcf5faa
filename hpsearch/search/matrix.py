"""The parameter tree as a matrix, so a model can score thousands of candidate configs at once.

A row holds one value per searchable parameter of the tree, branches included: a number in
[0, 1] for a range (log scale where the range is), an option index for a choice. Which
parameters a row uses follows from its choices (``active``); the others are carried along
and ignored. ``encode`` turns rows into a model's inputs: ranges and numeric choices as one
column on a [0, 1] scale, other choices one-hot, a parameter the row does not use at 0.5 (or
0 for one-hot columns).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hpsearch.search.space import Choice, Const, Float, Int, Param, Space

Array = NDArray[np.float64]


def numeric_choice(p: Choice) -> bool:
    """Ordered options (batch sizes): one column by rank, not one per option."""
    return len(p.options) > 2 and all(isinstance(o, int | float) and not isinstance(o, bool) for o in p.options)


class Matrix:
    def __init__(self, tree: Space) -> None:
        self.paths: list[str] = []
        self.params: list[Float | Int | Choice] = []
        self.conditions: list[list[tuple[int, int]]] = []  # per column: (choice column, option index) it needs
        self._visit(tree, "", [])
        self.is_choice = np.array([isinstance(p, Choice) for p in self.params], dtype=bool)
        self.sizes = np.array([len(p.options) if isinstance(p, Choice) else 0 for p in self.params], dtype=np.float64)
        self.columns: list[tuple[int, str, int]] = []  # (param index, "num" | "rank" | "hot", option)
        self.ranks: dict[int, Array] = {}  # numeric choice: option index -> position on [0, 1]
        for j, p in enumerate(self.params):
            if isinstance(p, Choice) and not numeric_choice(p):
                self.columns += [(j, "hot", k) for k in range(len(p.options))]
            elif isinstance(p, Choice):
                order = np.argsort(np.argsort([float(o) for o in p.options]))
                self.ranks[j] = order / (len(p.options) - 1)
                self.columns.append((j, "rank", 0))
            else:
                self.columns.append((j, "num", 0))
        self.width = len(self.columns)
        self.conditional = any(self.conditions)
        self.numeric = not self.is_choice.any()

    def _visit(self, space: Space, prefix: str, needs: list[tuple[int, int]]) -> None:
        for name, p in space.params.items():
            if isinstance(p, Const):
                continue
            path, j = f"{prefix}{name}", len(self.paths)
            self.paths.append(path)
            self.params.append(p)
            self.conditions.append(list(needs))
            if isinstance(p, Choice):
                for k, option in enumerate(p.options):
                    if option in p.branches:
                        self._visit(p.branches[option], f"{path}.{option}.", [*needs, (j, k)])

    def random(self, n: int, rng: np.random.Generator) -> Array:
        rows = rng.random((n, len(self.params)))
        rows[:, self.is_choice] = np.floor(rows[:, self.is_choice] * self.sizes[self.is_choice])
        return rows

    def active(self, rows: Array) -> NDArray[np.bool_]:
        used = np.ones(rows.shape, dtype=bool)
        for j, needs in enumerate(self.conditions):
            for column, option in needs:
                used[:, j] &= rows[:, column] == option
        return used

    def encode(self, rows: Array) -> Array:
        used = self.active(rows)
        out = np.zeros((len(rows), self.width))
        for i, (j, kind, option) in enumerate(self.columns):
            if kind == "num":
                out[:, i] = np.where(used[:, j], rows[:, j], 0.5)
            elif kind == "rank":
                out[:, i] = np.where(used[:, j], self.ranks[j][rows[:, j].astype(int)], 0.5)
            else:
                out[:, i] = np.where(used[:, j], rows[:, j] == option, 0.0)
        return out

    def row(self, params: Mapping[str, Any]) -> Array:
        """A trial's params (backend names) as a row; a parameter it lacks gets the middle (unused anyway)."""
        out = np.full(len(self.params), 0.5)
        for j, (path, p) in enumerate(zip(self.paths, self.params, strict=True)):
            value = params.get(path)
            if isinstance(p, Choice):
                out[j] = next((k for k, o in enumerate(p.options) if o == value and type(o) is type(value)), 0)
            elif value is not None:
                out[j] = unit(p, value)
        return out

    def params_of(self, row: Array) -> dict[str, Any]:
        """The backend params a row stands for: its used parameters only."""
        used = self.active(row[None, :])[0]
        return {
            path: p.options[int(row[j])] if isinstance(p, Choice) else value(p, float(row[j]))
            for j, (path, p) in enumerate(zip(self.paths, self.params, strict=True))
            if used[j]
        }

    def near(self, row: Array, n: int, rng: np.random.Generator, scale: float, flip: float = 0.1) -> Array:
        """``n`` neighbours of a row: ranges moved by N(0, scale) on the [0, 1] scale, each choice redrawn with probability ``flip``."""
        rows = np.repeat(row[None, :], n, axis=0)
        ranges = ~self.is_choice
        rows[:, ranges] = np.clip(rows[:, ranges] + rng.normal(0.0, scale, size=(n, int(ranges.sum()))), 0.0, 1.0)
        if self.is_choice.any():
            redraw = rng.random((n, int(self.is_choice.sum()))) < flip
            fresh = np.floor(rng.random(redraw.shape) * self.sizes[self.is_choice])
            block = rows[:, self.is_choice]
            block[redraw] = fresh[redraw]
            rows[:, self.is_choice] = block
        return rows


def unit(p: Param, v: Any) -> float:
    """A range's value on [0, 1] (log scale for a log range)."""
    assert isinstance(p, Float | Int)
    low, high, x = float(p.low), float(p.high), float(v)
    if p.log:
        low, high, x = math.log(low), math.log(high), math.log(x)
    return min(max((x - low) / (high - low), 0.0), 1.0)


def value(p: Param, u: float) -> int | float:
    """The range's value at ``u`` on [0, 1], on its step or integer grid."""
    assert isinstance(p, Float | Int)
    low, high = float(p.low), float(p.high)
    u = min(max(u, 0.0), 1.0)
    x = math.exp(math.log(low) + u * (math.log(high) - math.log(low))) if p.log else low + u * (high - low)
    if isinstance(p, Int):
        return int(min(max(round((x - p.low) / p.step) * p.step + p.low, p.low), p.high))
    if p.step:
        x = round((x - low) / p.step) * p.step + low
    return float(min(max(x, low), high))
