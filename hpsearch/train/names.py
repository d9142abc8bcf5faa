"""One wording for every 'unknown name' message, with a did-you-mean."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unknown_name(kind: str, name: object, known: Iterable[str], extra: str = "") -> str:
    """`unknown model 'resnt20' (did you mean 'resnet20'?); known: a, b, c`."""
    known = sorted(known)
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {kind} {name!r}{hint}; known: {', '.join(known)}{extra}"
