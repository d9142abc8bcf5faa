"""How a trial died, in words: the one place that classifies a death and names it.

Every engine ends a trial whose process died with a reason made here, so ``trials``,
``status``, the retry rule and the packer read one vocabulary:
- ``failed: process died (...)``: the process that ran the trial is gone (its pid, its
  heartbeat, its Ray worker, the Ray driver that stamped it, its Ray cluster); not the
  objective's fault, so the config is retried;
- ``failed: slot process ...``: a slot process of this run ended while it held a trial.
"""

from __future__ import annotations

import re
import signal
from typing import Any

DIED = "failed: process died"
SLOT = "failed: slot process"
# A Ray trial whose worker process died (kill -9, the out-of-memory killer, a lost node), or whose
# actor became unreachable (its raylet or the head restarted: "The actor ... is unavailable")
RAY_DIED = re.compile(
    r"ActorDiedError|RayActorError|ActorUnavailableError|WorkerCrashedError|NodeDiedError|OutOfMemoryError|died unexpectedly"
)


def pid_gone(pid: int, host: str) -> str:
    return f"{DIED} (pid {pid} on {host} is gone)"


def no_heartbeat(grace_s: float) -> str:
    return f"{DIED} (no heartbeat for {grace_s:g} s)"


def ray_worker_died(error: str) -> str | None:
    """The reason for a Ray trial error that is its worker's death, or None for the objective's own error."""
    return f"{DIED} (its Ray worker exited)" if RAY_DIED.search(error) else None


def ray_cluster_lost(address: str) -> str:
    """A Ray driver's trials when the cluster under it went away mid-run (its head stopped or restarted)."""
    return f"{DIED} (Ray cluster {address} lost)"


def slot_crash(rc: int, last_line: str) -> str:
    """A slot process's exit status, as the reason of the trial it held."""
    if rc < 0:
        name = signal.Signals(-rc).name
        return f"{SLOT} killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    return f"{SLOT} exited with status {rc}" + (f" ({last_line})" if last_line else "")


def is_death(reason: str) -> bool:
    """The trial ended because its process did, not because of its config."""
    return reason.startswith((DIED, SLOT))


def out_of_memory(user_attrs: dict[str, Any]) -> bool:
    """Retried with a smaller micro-batch, or failed on it (also "failed: OutOfMemoryError: CUDA out of memory ...");
    not a slot process killed by SIGKILL ("(out of memory?)": the host's memory, if anything)."""
    text = str(user_attrs.get("reason", ""))
    return bool(user_attrs.get("oom_retries")) or ("out of memory" in text.lower() and not text.startswith(SLOT))
