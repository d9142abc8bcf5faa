"""pydantic's validation errors as the spec's one-line problems: ``key.path: what is wrong, got X``."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from hpsearch.base.text import did_you_mean


def schema_errors(exc: ValidationError, model: type[BaseModel]) -> list[str]:
    seen: set[tuple[str, ...]] = set()
    out = []
    for err in exc.errors():
        key = tuple(str(p) for p in err["loc"] if not _union_tag(p))
        if key not in seen:  # `direction: maximise` fails both str and list[str]: say it once
            seen.add(key)
            out.append(format_error(err, model))
    return out


def _union_tag(part: Any) -> bool:
    """pydantic names the member of a union (``str``, ``list[str]``, ``literal[...]``) in an error's location."""
    return isinstance(part, str) and re.fullmatch(r"(str|int|float|bool|none|list|dict|literal|function-\w+)(\[.*\])?", part) is not None


def format_error(err: ErrorDetails, model: type[BaseModel]) -> str:
    loc = [str(p) for p in err["loc"] if not _union_tag(p)]
    key = ".".join(loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        return f"{key}: unknown key{did_you_mean(loc[-1], known_keys(model, loc[:-1]))}"
    if err["type"] == "missing":
        return f"{key}: required"
    msg = err["msg"].removeprefix("Value error, ")
    if ", got " in msg:  # a validator that already names the value
        return f"{key}: {msg}"
    hint = ""
    if err["type"] == "literal_error" and isinstance(err.get("input"), str):
        close = difflib.get_close_matches(err["input"], re.findall(r"'([^']*)'", err.get("ctx", {}).get("expected", "")), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{key}: {msg}, got {err.get('input')!r}{hint}"


def known_keys(model: Any, parent: list[str]) -> list[str]:
    for part in parent:
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None or not isinstance(field.annotation, type) or not issubclass(field.annotation, BaseModel):
            return []
        model = field.annotation
    return list(model.model_fields)
