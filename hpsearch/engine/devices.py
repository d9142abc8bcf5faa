"""Cores and GPUs -> a slot plan: how many trials run at once here, on which devices, with how many threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from glob import glob
from typing import TYPE_CHECKING, Any

from hpsearch.base.cores import cpu_cores
from hpsearch.base.errors import UserError
from hpsearch.engine.packing import Probe

if TYPE_CHECKING:
    from hpsearch.spec.loader import Resources

FAKE_GPUS_ENV = "HPSEARCH_FAKE_GPUS"  # pretend this many GPUs exist (tests, dry runs on a laptop)
FAKE_MEM_ENV = "HPSEARCH_FAKE_GPU_MEM_MB"  # their free memory in MiB: "24000" (each) or "24000,16000" (one per GPU)
PROBE_TIMEOUT_S = 120  # importing torch and creating a CUDA context per GPU, on a busy machine
THREADS_ENV = "HPSEARCH_THREADS"  # a slot's thread share, for a torch that was imported before OMP_NUM_THREADS applied
# OpenMP threads that wait for work spin on their core (GNU OpenMP: up to 300,000 spins) unless told
# to sleep. Beside two busy processes on 2 cores the quickstart took 4.8x its quiet time spinning,
# 3.1x sleeping (measured for the issue; docs/experiments/2026-12-busy-machine.md). libgomp reads it once,
# when torch loads it: set it before torch is imported.
WAIT_POLICY = {"OMP_WAIT_POLICY": "PASSIVE"}


def passive_waits(env: MutableMapping[str, str] = os.environ) -> None:
    """OpenMP threads sleep while they wait, unless the user chose otherwise (OMP_WAIT_POLICY=ACTIVE)."""
    for key, value in WAIT_POLICY.items():
        env.setdefault(key, value)


@dataclass(frozen=True)
class Slot:
    index: int
    devices: tuple[str, ...] | None  # CUDA_VISIBLE_DEVICES of the slot; () hides all GPUs, None inherits
    threads: int  # CPU threads for one trial (OMP_NUM_THREADS, torch.set_num_threads)

    def env(self) -> dict[str, str]:
        env = {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads), THREADS_ENV: str(self.threads)}
        if self.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.devices)
        return env

    def label(self) -> str:
        where = f"GPU {','.join(self.devices)}" if self.devices else "CPU"
        return f"slot {self.index}: {where}, {self.threads} thread{'s' if self.threads > 1 else ''}"


def visible_gpus() -> list[str]:
    """Device ids a slot may name in CUDA_VISIBLE_DEVICES, in index order."""
    fake = os.environ.get(FAKE_GPUS_ENV)
    if fake is not None:
        if not fake.strip().isdigit():
            raise UserError(f"{FAKE_GPUS_ENV}={fake!r}: expected a number of GPUs")
        return [str(i) for i in range(int(fake))]
    if not (glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")):
        return []  # no GPU driver: do not pay for importing torch
    import torch

    n = torch.cuda.device_count()
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:n] if len(listed) >= n else [str(i) for i in range(n)]


def plan_slots(resources: Resources, gpus: list[str], cores: int) -> list[Slot]:
    """Slots and their devices: GPU groups are handed out round-robin, so devices fill before they are shared."""
    r = resources
    chosen = gpus if r.gpus is None else pick_gpus(r.gpus, gpus)
    if not chosen or r.gpus_per_trial == 0:
        n = r.workers or 1
        devices = () if gpus else None  # CPU-only trials on a GPU machine must not touch the GPUs
        return [Slot(i, devices, threads_per_slot(r, cores, n)) for i in range(n)]
    per_trial = max(1, int(r.gpus_per_trial))
    share = r.per_gpu if r.gpus_per_trial >= 1 else int(1 / r.gpus_per_trial + 1e-9)
    groups = [tuple(chosen[i : i + per_trial]) for i in range(0, len(chosen) - per_trial + 1, per_trial)]
    if not groups:
        raise UserError(f"resources.gpus_per_trial={per_trial} but only {len(chosen)} GPU(s) to use")
    if r.trials_per_gpu == "auto":  # one slot per GPU now; slots.py adds more as packing.py plans them
        most = min(r.workers or len(groups) * r.trials_per_gpu_max, len(groups) * r.trials_per_gpu_max)
        threads = threads_per_slot(r, cores, most)  # the share of the most slots the plan may reach
        return [Slot(i, groups[i], threads) for i in range(min(r.workers or len(groups), len(groups)))]
    capacity = len(groups) * share
    n = r.workers or capacity
    if n > capacity:
        raise UserError(
            f"resources.workers={n} needs {n} GPU shares, but {len(chosen)} GPU(s) with {per_trial} per trial and "
            f"{share} trial(s) per GPU give {capacity}; lower --workers or raise resources.trials_per_gpu"
        )
    return [Slot(i, groups[i % len(groups)], threads_per_slot(r, cores, n)) for i in range(n)]


def pick_gpus(indices: list[int], gpus: list[str]) -> list[str]:
    missing = [i for i in indices if i >= len(gpus)]
    if missing:
        raise UserError(f"resources.gpus: no GPU {missing[0]} on this machine ({len(gpus)} visible: {list(range(len(gpus)))})")
    return [gpus[i] for i in indices]


def threads_per_slot(r: Resources, cores: int, slots: int) -> int:
    return max(1, int(r.cpus_per_trial)) if r.cpus_per_trial else max(1, cores // slots)


def threads_notice(fixed: dict[str, Any], slots: list[Slot], cores: int) -> str | None:
    """One line when a spec's ``fixed.threads`` is more than the slots' share of the cores; the slots
    lower it to their share (Spec.config_for), since more would only make them take turns."""
    asked = fixed.get("threads")
    if not slots or isinstance(asked, bool) or not isinstance(asked, int) or asked <= slots[0].threads:
        return None
    share = slots[0].threads
    return (
        f"fixed.threads={asked} would oversubscribe {len(slots)} slot(s) on {cores} core(s): each trial runs "
        f"{share} thread{'s' if share > 1 else ''} (resources.cpus_per_trial sets the share)"
    )


def slots_for(resources: Resources) -> list[Slot]:
    return plan_slots(resources, visible_gpus(), cpu_cores())


def in_process(slots: list[Slot], resources: Resources) -> bool:
    """One slot that needs no device binding runs in the calling process, as a plain ``hpsearch run`` does."""
    packed = resources.trials_per_gpu == "auto" and bool(slots[0].devices)  # slots.py starts more slots later
    return len(slots) == 1 and resources.gpus is None and slots[0].devices != () and not packed


def gpu_memory(gpus: list[str]) -> dict[str, Probe]:
    """Free and total memory (MiB) of the visible GPUs, by id; empty when it cannot be read.

    Read in a child process (torch.cuda.mem_get_info): in this one, the CUDA context it creates
    would hold a few hundred MiB of every GPU for the whole run."""
    fake = os.environ.get(FAKE_MEM_ENV)
    if fake is not None:
        return fake_memory(fake, gpus)
    if not gpus or os.environ.get(FAKE_GPUS_ENV) is not None:
        return {}
    code = "import json, torch; print(json.dumps([torch.cuda.mem_get_info(i) for i in range(torch.cuda.device_count())]))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=True)
        pairs = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {}
    return {gpu: Probe(free / 2**20, total / 2**20) for gpu, (free, total) in zip(gpus, pairs, strict=False)}


def fake_memory(text: str, gpus: list[str]) -> dict[str, Probe]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) <= 0 or len(values) not in (1, len(gpus)):
        raise UserError(f"{FAKE_MEM_ENV}={text!r}: expected free MiB for each GPU, e.g. 24000 or one per GPU ({len(gpus)}): 24000,16000")
    mb = values * len(gpus) if len(values) == 1 else values
    return {gpu: Probe(m, m) for gpu, m in zip(gpus, mb, strict=True)}
