"""In-memory splits and their seeded, class-stratified carving: validation split and subsets.

A `Split` holds uint8 N×C×H×W images and int64 labels; `train_subset`/`val_subset`/`test_subset`
keep a seeded, class-stratified part of a split, for fast search rungs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sized
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset, Subset


@dataclass
class Split:
    images: torch.Tensor  # uint8, N×C×H×W
    labels: torch.Tensor  # int64, N

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, index: torch.Tensor) -> Split:
        return Split(self.images[index], self.labels[index])

    def to(self, device: torch.device) -> Split:
        return Split(self.images.to(device), self.labels.to(device))


@dataclass
class Splits:
    """What a dataset loader returns, before the validation split is carved out."""

    train: Split | Dataset[Any]
    test: Split | Dataset[Any] | None
    num_classes: int
    image_shape: tuple[int, int, int]  # C, H, W as the model sees it
    mean: tuple[float, ...]  # per channel, on the 0..1 scale
    std: tuple[float, ...]


def carve(data: Split | Dataset[Any], fraction: float, seed: int) -> tuple[Any, Any]:
    """Seeded (rest, held_out) split; held_out has round(n*fraction) items, at least 1."""
    rest_idx, held_idx = carve_index(_size(data), fraction, seed)
    if isinstance(data, Split):
        return data.subset(rest_idx), data.subset(held_idx)
    return Subset(data, rest_idx.tolist()), Subset(data, held_idx.tolist())


def carve_index(n: int, fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    held = min(n - 1, max(1, round(n * fraction)))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return perm[held:].sort().values, perm[:held].sort().values


def subsample(data: Split | Dataset[Any], n: int | None, seed: int, what: str) -> Any:
    """The first `n` items of a seeded class-stratified order; None keeps everything.

    Each class contributes in proportion to its share (within one image), and for one seed a
    smaller subset is contained in a larger one. Datasets without known labels get a seeded
    random sample.
    """
    if n is None:
        return data
    index = subsample_index(_size(data), _labels(data), n, seed, what)
    return data.subset(index) if isinstance(data, Split) else Subset(data, index.tolist())


def subsample_index(size: int, labels: torch.Tensor | None, n: int, seed: int, what: str) -> torch.Tensor:
    if n > size:
        raise ValueError(f"{what}={n} is more than the {size} images in that split")
    order = torch.randperm(size, generator=torch.Generator().manual_seed(seed))
    if labels is not None:
        labels = labels[order]
        counts = torch.bincount(labels).double()
        rank = torch.empty(len(labels), dtype=torch.double)  # position of each item within its class, 0-based
        for c in torch.unique(labels):
            where = (labels == c).nonzero().squeeze(1)
            rank[where] = torch.arange(len(where), dtype=torch.double)
        order = order[torch.sort((rank + 0.5) / counts[labels], stable=True).indices]
    return order[:n].sort().values


def carve_subsets(data: Split | Dataset[Any], fraction: float, seed: int, train_n: int | None, val_n: int | None) -> tuple[Any, Any]:
    """``subsample(carve(...))`` for the train and validation parts, the same items; a Split's
    images are copied once, for the items kept (carving first copied the whole 54,000-image
    Fashion-MNIST train split, 42 MB, on every trial: 14 ms a copy)."""
    if not isinstance(data, Split):
        train, val = carve(data, fraction, seed)
        return subsample(train, train_n, seed, "train_subset"), subsample(val, val_n, seed, "val_subset")
    labels = data.labels.cpu()
    key = (hashlib.blake2b(labels.numpy().tobytes(), digest_size=16).digest(), fraction, seed, train_n, val_n)
    if key not in _CARVED:
        parts = []
        for index, n, what in zip(carve_index(len(data), fraction, seed), (train_n, val_n), ("train_subset", "val_subset"), strict=True):
            parts.append(index if n is None else index[subsample_index(len(index), labels[index], n, seed, what)])
        if len(_CARVED) >= 16:  # a process serves one or two datasets; bound it all the same
            _CARVED.pop(next(iter(_CARVED)))
        _CARVED[key] = (parts[0], parts[1])
    train, val = _CARVED[key]
    return data.subset(train), data.subset(val)


_CARVED: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = {}  # (labels' hash, fraction, seed, n, n) -> indices


def _size(data: Split | Dataset[Any]) -> int:
    if not isinstance(data, Sized):  # Split, Subset and ImageFolder are; torch's Dataset type does not say so
        raise TypeError(f"{type(data).__name__} has no len()")
    return len(data)


def _labels(data: Split | Dataset[Any]) -> torch.Tensor | None:
    if isinstance(data, Split):
        return data.labels.cpu()
    if isinstance(data, Subset) and hasattr(data.dataset, "targets"):  # carve()'s split of an ImageFolder
        return torch.as_tensor(data.dataset.targets)[torch.as_tensor(data.indices)]
    return None
