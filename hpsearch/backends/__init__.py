"""Backends: name -> module with ``run(spec, options) -> Summary``. Imported lazily (ray is heavy)."""

from __future__ import annotations

import importlib
from typing import Any

BACKENDS = {"optuna": "hpsearch.backends.optuna", "ray": "hpsearch.backends.ray"}


def get_backend(name: str) -> Any:
    return importlib.import_module(BACKENDS[name])
