"""``trials_per_gpu: auto``: how many trial slots fit on each GPU, from its free memory and measured peaks.

Pure functions and a small state holder, no torch and no processes: ``devices.gpu_memory``
probes the GPUs once, ``slots.run_slots`` feeds in the trials its slots finish and starts or
retires slots to follow the plan.

The rule, per GPU:

    slots = floor(free_mb * (1 - margin) / (trial_mb + OVERHEAD_MB)), at least 1, at most the cap

``trial_mb`` is the peak of the largest config seen so far, estimated from the measured peaks
(``peak_mem_mb``, CUDA's max_memory_allocated) of this run's finished trials: each peak is
scaled up to the largest ``batch_size`` seen (linearly) and the largest ``width`` seen (squared),
and the largest result is used. With memory modelled as fixed + a*batch*width + b*width**2
(activations, then weights, gradients and optimizer state), that bound never falls below the
model's figure for any config up to those sizes; it overestimates a config that grows in one
size only, which costs slots, not an out-of-memory error. Until a trial of this run reports a
peak, each GPU runs one slot. An out-of-memory retry on a GPU lowers that GPU's ceiling to one
slot fewer than it ran at the time, for the rest of the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# MiB per slot process that max_memory_allocated does not count: the CUDA context and its
# kernels (about 300-500 MiB, by driver and GPU) and the caching allocator's reserved but
# unallocated blocks. A guess, not measured here (no GPU on the machine this was written on).
OVERHEAD_MB = 500.0
MARGIN = 0.15  # default share of the free memory left unused
CAP = 4  # default most slots per GPU; a guess, not measured: each slot is a process with its own CUDA context and CPU share


@dataclass(frozen=True)
class Probe:
    """One GPU's memory when the run starts, in MiB."""

    free_mb: float
    total_mb: float


@dataclass(frozen=True)
class Size:
    """The config values that drive a trial's memory; None when the config does not set them."""

    batch: float | None = None  # batch_size: samples per forward pass (the micro-batch)
    width: float | None = None  # width: channels of the first stage (models of the built-in objective), or the MLP's widest layer


@dataclass(frozen=True)
class Peak:
    mb: float  # peak_mem_mb the trial reported (MiB)
    size: Size  # of the config that ran (after an out-of-memory retry: the smaller micro-batch)


def size_of(config: Mapping[str, Any]) -> Size:
    """``width``, else the widest of ``mlp_hidden`` (the MLP's width: weights grow with it too)."""
    width = _number(config.get("width"))
    hidden = config.get("mlp_hidden")
    if width is None and isinstance(hidden, (list, tuple)):
        width = max((w for w in map(_number, hidden) if w is not None), default=None)
    return Size(_number(config.get("batch_size")), width)


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def largest(sizes: Sequence[Size]) -> Size:
    batches = [s.batch for s in sizes if s.batch is not None]
    widths = [s.width for s in sizes if s.width is not None]
    return Size(max(batches, default=None), max(widths, default=None))


def trial_mb(peaks: Sequence[Peak], sizes: Sequence[Size] = ()) -> float | None:
    """Estimated peak (MiB) of the largest config among the peaks' and ``sizes`` (configs seen, not yet measured)."""
    if not peaks:
        return None
    ref = largest([p.size for p in peaks] + list(sizes))
    return max(p.mb * _ratio(ref.batch, p.size.batch) * _ratio(ref.width, p.size.width) ** 2 for p in peaks)


def _ratio(ref: float | None, own: float | None) -> float:
    return max(1.0, ref / own) if ref is not None and own is not None else 1.0


@dataclass(frozen=True)
class Plan:
    """Slots per GPU, and why."""

    slots: tuple[int, ...]
    trial_mb: float | None  # None: nothing measured yet
    margin: float
    overhead_mb: float
    cap: int
    ceilings: tuple[int | None, ...]  # after an out-of-memory retry on that GPU
    measured_mb: float | None = None  # the largest peak measured; below trial_mb when a larger config was seen

    def lines(self, names: Sequence[str], probes: Sequence[Probe]) -> list[str]:
        return [self.line(i, name, probes[i]) for i, name in enumerate(names)]

    def line(self, i: int, name: str, probe: Probe) -> str:
        n = self.slots[i]
        head = f"GPU {name}: {n} slot{'s' if n != 1 else ''}"
        if self.trial_mb is None:
            return f"{head} until a trial reports its peak memory ({probe.free_mb:,.0f} MB free)"
        scaled = f" est. from {self.measured_mb:,.0f} MB measured" if self.measured_mb and self.trial_mb > self.measured_mb else ""
        why = (
            f"peak {self.trial_mb:,.0f} MB{scaled} + {self.overhead_mb:,.0f} MB/process, "
            f"{100 * self.margin:.0f}% margin of {probe.free_mb:,.0f} MB free"
        )
        if n == self.ceilings[i]:
            why += ", lowered after out of memory"
        elif n == self.cap and n < self.fits(probe):
            why += f", cap {self.cap}"
        return f"{head} ({why})"

    def fits(self, probe: Probe) -> int:
        return fits(probe, self.trial_mb, self.margin, self.overhead_mb)


def fits(probe: Probe, need_mb: float | None, margin: float, overhead_mb: float = OVERHEAD_MB) -> int:
    """Trials of ``need_mb`` that fit in the usable part of the free memory; 1 when nothing is measured."""
    if need_mb is None:
        return 1
    return max(1, math.floor(probe.free_mb * (1 - margin) / (need_mb + overhead_mb)))


def plan(
    probes: Sequence[Probe],
    peaks: Sequence[Peak],
    margin: float = MARGIN,
    cap: int = CAP,
    sizes: Sequence[Size] = (),
    ceilings: Sequence[int | None] | None = None,
    total: int | None = None,
    overhead_mb: float = OVERHEAD_MB,
) -> Plan:
    """Slots per GPU: as many as fit (``fits``), at most ``cap`` and the GPU's ceiling, at least 1;
    with ``total`` (resources.workers) the fullest GPUs give up slots until the sum is at most that."""
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin=}")
    if cap < 1:
        raise ValueError(f"cap must be at least 1, got {cap=}")
    need = trial_mb(peaks, sizes)
    ceilings = list(ceilings) if ceilings is not None else [None] * len(probes)
    slots = [min(fits(p, need, margin, overhead_mb), cap, c or cap) for p, c in zip(probes, ceilings, strict=True)]
    while total is not None and sum(slots) > max(total, len(slots)):
        i = max(range(len(slots)), key=lambda k: (slots[k], k))  # the fullest; of equals, the last
        slots[i] -= 1
    measured = max((p.mb for p in peaks), default=None)
    return Plan(tuple(max(1, n) for n in slots), need, margin, overhead_mb, cap, tuple(ceilings), measured)


@dataclass
class Packer:
    """The run's packing state: probes, measured peaks, configs seen, ceilings; ``update`` says when the plan changed."""

    names: list[str]  # GPU ids, as slots name them in CUDA_VISIBLE_DEVICES
    probes: list[Probe]
    margin: float = MARGIN
    cap: int = CAP
    total: int | None = None
    peaks: list[Peak] = field(default_factory=list)
    sizes: list[Size] = field(default_factory=list)
    ceilings: list[int | None] = field(default_factory=list)
    current: Plan | None = None

    def __post_init__(self) -> None:
        self.ceilings = self.ceilings or [None] * len(self.names)
        self.current = self.plan()

    def plan(self) -> Plan:
        return plan(self.probes, self.peaks, self.margin, self.cap, self.sizes, self.ceilings, self.total)

    def measured(self, peak_mb: float | None, ran: Mapping[str, Any]) -> None:
        """A finished trial: its peak (MiB) and the config that produced it."""
        if peak_mb is not None and math.isfinite(peak_mb) and peak_mb > 0:
            self.peaks.append(Peak(float(peak_mb), size_of(ran)))

    def seen(self, config: Mapping[str, Any]) -> None:
        """A config claimed by a slot (its size counts before its peak is known)."""
        self.sizes.append(size_of(config))

    def out_of_memory(self, gpu: str, running: int) -> None:
        """A trial on ``gpu`` ran out of memory while ``running`` slots shared it."""
        i = self.names.index(gpu)
        ceiling = max(1, running - 1)
        old = self.ceilings[i]
        self.ceilings[i] = ceiling if old is None else min(old, ceiling)

    def update(self) -> Plan | None:
        """The new plan when its slots differ from the current one's, or when it is the first one with a measured peak."""
        new = self.plan()
        old = self.current
        if old is not None and new.slots == old.slots and (new.trial_mb is None or old.trial_mb is not None):
            return None
        self.current = new
        return new

    def lines(self) -> list[str]:
        assert self.current is not None
        return self.current.lines(self.names, self.probes)

    def wanted(self, gpu: str) -> int:
        assert self.current is not None
        return self.current.slots[self.names.index(gpu)]
