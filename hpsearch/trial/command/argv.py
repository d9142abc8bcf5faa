"""A trial's config as the script's command-line flags."""

from __future__ import annotations

import json
from typing import Any


def flags(config: dict[str, Any]) -> list[str]:
    """One ``--name=value`` per config key; the space's config is flat, so a conditional choice gives
    ``--optimizer=sgd --lr=0.1 --momentum=0.9`` (only the chosen option's parameters)."""
    out = []
    for name, value in config.items():
        if name.startswith("_") or value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list | dict):
            text = json.dumps(value)
        else:
            text = str(value)
        out.append(f"--{name}={text}")
    return out
