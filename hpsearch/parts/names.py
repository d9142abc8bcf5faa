"""One wording for every 'unknown name' message of the training parts, with a did-you-mean."""

from __future__ import annotations

from collections.abc import Iterable

from hpsearch.base.text import closest


def hint(name: object, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for a near miss (hpsearch.base.text.closest), else ''."""
    match = closest(name, known)
    return f" (did you mean {match!r}?)" if match else ""


def unknown_name(kind: str, name: object, known: Iterable[str], extra: str = "") -> str:
    """`unknown model 'resnt20' (did you mean 'resnet20'?); known: a, b, c`."""
    known = sorted(known)
    return f"unknown {kind} {name!r}{hint(name, known)}; known: {', '.join(known)}{extra}"
