"""The few text helpers every layer uses: numbers in tables and lines, finiteness, did-you-mean."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable
from typing import Any


def fmt(value: Any) -> str:
    """A value in a table cell or a progress line: 4 significant digits, '-' for nothing."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def as_metric(value: Any) -> float | None:
    """A metric value as a float: Python numbers, 0-d tensors and NumPy scalars (anything with
    ``.item()`` that holds one number); None for booleans and anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    size = getattr(value, "numel", None) or getattr(value, "size", None)
    size = size() if callable(size) else size
    if callable(item) and size in (None, 1):
        try:
            inner = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return float(inner) if isinstance(inner, (int, float)) and not isinstance(inner, bool) else None
    return None


def finite(value: Any) -> bool:
    """A real number that is not NaN or infinite (booleans are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def closest(name: object, known: Iterable[str]) -> str | None:
    """Most similar known name; ties go to the longer shared prefix (resnet2O -> resnet20)."""
    name = str(name)
    candidates = difflib.get_close_matches(name, list(known), n=5, cutoff=0.6)

    def score(k: str) -> tuple[float, int]:
        return round(difflib.SequenceMatcher(None, name, k).ratio(), 9), len(os.path.commonprefix([name, k]))

    return max(candidates, key=score) if candidates else None


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """'; did you mean 'x'?' for a near miss, else ' (known: a, b)', to append to an 'unknown ...' message."""
    known = list(known)
    match = closest(name, known)
    if match:
        return f"; did you mean {match!r}?"
    return f" (known: {', '.join(known)})" if known else ""
