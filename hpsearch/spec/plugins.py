"""A sampler or pruner named in the spec: a registry name, or a user's class by import path.

``sampler: {name: pkg.module:Class, key: value, ...}``: the keys beside the name are the class's
keyword arguments (``class_kwargs``); ``check_plugins`` imports and builds the class when the
spec's objective is checked, so a wrong one is one line before anything runs.
"""

from __future__ import annotations

import difflib
from typing import Any

from hpsearch.spec.registry import Spec, build_plugin, is_import_path


def plugin_name(value: str | None, registry: dict[str, Any]) -> str | None:
    """A registry name, or a class as ``package.module:Class`` (checked when the objective is)."""
    if value is None or value in registry or is_import_path(value):
        return value
    names = [repr(n) for n in registry]
    close = difflib.get_close_matches(value, list(registry), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"Input should be {', '.join(names[:-1])} or {names[-1]} (or a class as 'package.module:Class'), got {value!r}{hint}")


def class_kwargs(value: Any, own: tuple[str, ...]) -> Any:
    """``{name: pkg.mod:Class, key: value, ...}``: the keys other than ``own`` are the class's keyword arguments."""
    if not isinstance(value, dict) or not is_import_path(value.get("name")):
        return value
    return {**{k: v for k, v in value.items() if k in own}, "kwargs": {k: v for k, v in value.items() if k not in own}}


def check_plugins(spec: Spec, errors: list[str]) -> None:
    """A sampler or pruner class named by import path: importable, the right base class, its keyword arguments taken."""
    for kind, section in (("sampler", spec.sampler), ("pruner", spec.pruner)):
        if is_import_path(section.name):
            try:
                build_plugin(spec, kind)  # type: ignore[arg-type]
            except ValueError as exc:
                errors.append(f"{kind}.name: {exc}")
    if spec.backend == "ray" and is_import_path(spec.pruner.name):
        errors.append(f"pruner.name: {spec.pruner.name}: backend ray stops trials with ray.scheduler; a pruner class needs backend: optuna")
