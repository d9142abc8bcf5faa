"""Peers outside Optuna (DEHB, SMAC3's Hyperband facade), driven through their own ask/tell.

Each is registered only when its package imports (``pip install -e '.[bench]'``)."""

from __future__ import annotations

from typing import Any


def available() -> dict[str, Any]:
    return {}
