"""One wording for every 'unknown name' message, with a did-you-mean."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable


def closest(name: object, known: Iterable[str]) -> str | None:
    """Most similar known name; ties go to the longer shared prefix (resnet2O -> resnet20)."""
    name = str(name)
    candidates = difflib.get_close_matches(name, list(known), n=5, cutoff=0.6)

    def score(k: str) -> tuple[float, int]:
        return round(difflib.SequenceMatcher(None, name, k).ratio(), 9), len(os.path.commonprefix([name, k]))

    return max(candidates, key=score) if candidates else None


def did_you_mean(name: object, known: Iterable[str]) -> str:
    match = closest(name, known)
    return f" (did you mean {match!r}?)" if match else ""


def unknown_name(kind: str, name: object, known: Iterable[str], extra: str = "") -> str:
    """`unknown model 'resnt20' (did you mean 'resnet20'?); known: a, b, c`."""
    known = sorted(known)
    return f"unknown {kind} {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}{extra}"
