"""How many cores this process may use: the one count every layer reads."""

from __future__ import annotations

import os


def cpu_cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
