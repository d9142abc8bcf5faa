"""``--set key.path=value`` and path flags (--output, --storage) applied to a spec's raw mapping."""

from __future__ import annotations

import os
from typing import Any

from hpsearch.base.errors import SpecError
from hpsearch.spec.safe_yaml import MAX_DEPTH, parse_value


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...], where: str) -> dict[str, Any]:
    """``--set a.b=value``: value is parsed as YAML, so numbers, lists and booleans work."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"--set {item!r}: expected key.path=value, e.g. --set budget.trials=10")
        parts = key.strip().split(".")
        if len(parts) > MAX_DEPTH:
            raise SpecError(f"--set {key.strip()[:60]}...: the key path is {len(parts)} levels deep (limit {MAX_DEPTH})")
        value = parse_value(text, f"--set {key.strip()}")
        node = raw
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise SpecError(f"{where}: --set {key}: {part} is not a mapping")
            node = child
        node[parts[-1]] = value
    return raw


def from_cwd(raw: dict[str, Any], flagged: set[str]) -> None:
    """Paths given as flags (--output, --storage, --set objective=...) are relative to the current
    folder, not to the spec: make them absolute before the spec's own rule applies."""
    if "output" in flagged and isinstance(raw.get("output"), str):
        raw["output"] = os.path.abspath(raw["output"])
    storage = raw.get("storage")
    url = storage.get("url") if isinstance(storage, dict) else storage
    if flagged & {"storage", "storage.url"} and isinstance(url, str) and url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        url = "sqlite:///" + os.path.abspath(url.removeprefix("sqlite:///"))
        if isinstance(storage, dict):
            storage["url"] = url
        else:
            raw["storage"] = url
    objective = raw.get("objective")
    if "objective" in flagged and isinstance(objective, str):
        module, sep, fn = objective.rpartition(":")
        if sep and module.endswith(".py") and not os.path.isabs(module):
            raw["objective"] = f"{os.path.abspath(module)}:{fn}"
