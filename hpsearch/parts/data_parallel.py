"""Data parallelism for the training parts when ``torch.distributed`` is initialized
(``processes: N``; hpsearch/trial/ranks.py starts the ranks). Without it every helper is a no-op.

Sharding is by rank slicing: every rank iterates the same seeded loader over global batches of
``batch_size * world`` samples and trains on ``x[rank::world]``. DDP averages the ranks'
gradients, so one step equals one single-process step on the global batch: N processes with
``batch_size: b`` train like one process with ``batch_size: N*b`` (BatchNorm statistics aside,
which stay per rank).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]


def rank_world() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside a process group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def local_device(device: torch.device) -> torch.device:
    """A CUDA rank trains on its own GPU (the launcher made it the current one)."""
    if device.type == "cuda" and device.index is None and rank_world()[1] > 1:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def wrap(model: nn.Module, device: torch.device) -> nn.Module:
    """DistributedDataParallel around ``model`` in a process group, else ``model``."""
    if rank_world()[1] == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


class Shard:
    """This rank's slice ``[rank::world]`` of each batch of ``loader`` (which yields global batches)."""

    def __init__(self, loader: Any, rank: int, world: int) -> None:
        self.loader, self.rank, self.world = loader, rank, world

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:  # batch_size, group, ...: the global loader's
        return getattr(self.loader, name)

    def __iter__(self) -> Iterator[Batch]:
        for x, y in self.loader:
            yield x[self.rank :: self.world], y[self.rank :: self.world]


def shard(loader: Any) -> Any:
    rank, world = rank_world()
    return Shard(loader, rank, world) if world > 1 else loader


def is_sharded(loader: Iterable[Batch]) -> bool:
    return isinstance(loader, Shard)


def no_sync(model: nn.Module, skip: bool) -> contextlib.AbstractContextManager[object]:
    """DDP's ``no_sync()`` for a micro-batch whose gradients are only accumulated (not the last of a step)."""
    from torch.nn.parallel import DistributedDataParallel

    inner = getattr(model, "_orig_mod", model)  # torch.compile's wrapper around the DDP module
    if skip and isinstance(inner, DistributedDataParallel):
        return inner.no_sync()
    return contextlib.nullcontext()


def sum_across(tensor: torch.Tensor) -> torch.Tensor:
    """The sum over ranks (a collective: every rank must call it)."""
    if rank_world()[1] > 1:
        import torch.distributed as dist

        tensor = tensor.clone()
        dist.all_reduce(tensor)
    return tensor


def all_finite(tensor: torch.Tensor) -> bool:
    """True when ``tensor`` is finite on every rank, so that all ranks stop an epoch together."""
    bad = (~torch.isfinite(tensor)).any().float().reshape(1)
    return bool(sum_across(bad).item() == 0)
