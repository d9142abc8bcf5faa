"""Load an objective from ``module:function`` or ``path/to/file.py:function``.

An objective is ``fn(config: dict, reporter) -> dict[str, float]``. It may carry
``fn.validate(config) -> list[str]`` returning problems with a config, checked before a
study starts.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from hpsearch.trial.command.options import FINAL_KEY, PREFIX, from_entry
from hpsearch.trial.command.runner import make_objective

__all__ = ["BUILTIN", "FINAL_KEY", "PREFIX", "Objective", "load_objective"]

Objective = Callable[[dict[str, Any], Any], dict[str, float]]
BUILTIN = "hpsearch.objectives.image_classification:train"


def load_objective(entry: str, base_dir: Path | None = None) -> Objective:
    """Import the objective; raise ValueError with a one-line reason when it cannot be had.
    ``command:{json}`` (what the loader makes of ``objective: {command: ...}``) gives the command adapter."""
    if entry.startswith(PREFIX):
        try:
            command = from_entry(entry)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not a command entry: {exc}") from None
        made: Objective = make_objective(command)
        return made
    module_part, sep, func_name = entry.rpartition(":")
    if not sep or not module_part or not func_name.isidentifier():
        raise ValueError(f"must be 'module:function' or 'path/to/file.py:function', got {entry!r}")
    module = import_file(module_part, base_dir) if module_part.endswith(".py") else import_module(module_part)
    fn = getattr(module, func_name, None)
    if fn is None:
        raise ValueError(f"{module_part} has no function {func_name!r}")
    if not callable(fn):
        raise ValueError(f"{module_part}:{func_name} is not callable")
    objective: Objective = fn  # the user's function: its parameters and return value are checked when it runs
    return objective


def import_module(name: str) -> ModuleType:
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise ValueError(f"no module named {name!r} (looked on sys.path and in {Path.cwd()})") from None
        raise ValueError(f"importing {name!r} failed: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any import-time error is the user's to see in one line
        raise ValueError(f"importing {name!r} failed: {type(exc).__name__}: {exc}") from None


def import_file(path: str, base_dir: Path | None) -> ModuleType:
    """A relative path is relative to ``base_dir`` (a spec's folder), else to the current folder."""
    found = Path(path) if Path(path).is_absolute() else (base_dir or Path.cwd()) / path
    if not found.is_file():
        where = (
            "; a relative path in a spec is relative to the spec's folder" if base_dir is not None and not Path(path).is_absolute() else ""
        )
        raise ValueError(f"file not found: {path} (looked for {os.path.normpath(found.absolute())}{where})")
    name = f"hpsearch_user_{abs(hash(str(found.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, found)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(found.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001
        del sys.modules[name]
        raise ValueError(f"importing {path} failed: {type(exc).__name__}: {exc}") from None
    return module
