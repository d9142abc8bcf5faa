"""Loaders that augment whole batches on the device.

Small datasets live in memory as uint8 N×C×H×W tensors, on the GPU when there is one; a
`TensorLoader` slices shuffled batches from them and runs crop/flip/cutout on the batch, so an
epoch costs no Python per sample. Datasets that must stream (imagefolder) decode in DataLoader
workers and get the same batch transform after a non-blocking copy. Training loaders drop the
last incomplete optimizer step (a group of `accum_steps` micro-batches) so every step sees
exactly batch_size*accum_steps samples.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from hpsearch.parts.datasets.formats import DATASETS
from hpsearch.parts.datasets.splits import Split, carve_subsets, subsample
from hpsearch.parts.settings import setting

Batch = tuple[torch.Tensor, torch.Tensor]


def random_crop(x: torch.Tensor, padding: int) -> torch.Tensor:
    """Zero-pad by `padding` pixels, then cut each image at its own random offset."""
    n, c, h, w = x.shape
    padded = F.pad(x, (padding,) * 4)
    dy, dx = torch.randint(0, 2 * padding + 1, (2, n, 1), device=x.device)
    rows = (dy + torch.arange(h, device=x.device))[:, None, :, None]  # n,1,h,1
    cols = (dx + torch.arange(w, device=x.device))[:, None, None, :]  # n,1,1,w
    batch = torch.arange(n, device=x.device)[:, None, None, None]
    channel = torch.arange(c, device=x.device)[None, :, None, None]
    return padded[batch, channel, rows, cols]


def random_hflip(x: torch.Tensor) -> torch.Tensor:
    flip = torch.rand(x.shape[0], device=x.device) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(3), x)


def cutout(x: torch.Tensor, size: int) -> torch.Tensor:
    """Zero (= dataset mean after normalizing) one size×size square per image, centre uniform."""
    n, _, h, w = x.shape
    cy = torch.randint(0, h, (n, 1), device=x.device) - size // 2
    cx = torch.randint(0, w, (n, 1), device=x.device) - size // 2
    ys, xs = torch.arange(h, device=x.device), torch.arange(w, device=x.device)
    in_rows = (ys >= cy) & (ys < cy + size)  # n,h
    in_cols = (xs >= cx) & (xs < cx + size)  # n,w
    return x.masked_fill((in_rows[:, :, None] & in_cols[:, None, :])[:, None], 0.0)


@dataclass
class BatchTransform:
    """uint8 batch on the device -> normalized float batch, augmented when training."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    crop_padding: int = 0
    hflip: bool = False
    cutout: int = 0
    channels_last: bool = False
    _cache: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict, repr=False)

    def _affine(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel scale and offset, built once per device: a host->GPU copy would sync."""
        if device not in self._cache:
            scale = torch.tensor([1 / (255 * s) for s in self.std])[:, None, None]
            offset = torch.tensor([-m / s for m, s in zip(self.mean, self.std, strict=True)])[:, None, None]
            self._cache[device] = (scale.to(device), offset.to(device))
        return self._cache[device]

    def __call__(self, x: torch.Tensor, train: bool) -> torch.Tensor:
        if train and self.crop_padding > 0:
            x = random_crop(x, self.crop_padding)
        if train and self.hflip:
            x = random_hflip(x)
        scale, offset = self._affine(x.device)
        x = torch.addcmul(offset, x.float(), scale)  # (x/255 - mean)/std in one kernel
        if train and self.cutout > 0:
            x = cutout(x, self.cutout)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x


class TensorLoader:
    """Shuffled batches sliced from device tensors; shuffling draws from the global RNG."""

    def __init__(self, split: Split, batch_size: int, transform: BatchTransform, *, train: bool, group: int = 1) -> None:
        self.split, self.batch_size, self.transform, self.train = split, batch_size, transform, train
        self.group = group  # training keeps whole groups of `group` full batches (one optimizer step)

    def __len__(self) -> int:
        n = len(self.split)
        if self.train:
            return n // (self.batch_size * self.group) * self.group
        return -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        device = self.split.labels.device
        n = len(self.split)
        order = torch.randperm(n, device=device) if self.train else torch.arange(n, device=device)
        for b in range(len(self)):
            index = order[b * self.batch_size : (b + 1) * self.batch_size]
            yield self.transform(self.split.images[index], self.train), self.split.labels[index]


class StreamLoader:
    """DataLoader for datasets decoded per sample; batch transform runs on the device."""

    def __init__(
        self,
        dataset: Dataset[Any],
        batch_size: int,
        transform: BatchTransform,
        device: torch.device,
        *,
        train: bool,
        group: int = 1,
        num_workers: int = 2,
    ) -> None:
        self.loader = DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=train,
            drop_last=train,
            num_workers=num_workers,
            pin_memory=device.type == "cuda",
            persistent_workers=num_workers > 0,
        )
        self.batch_size, self.transform, self.device, self.train = batch_size, transform, device, train
        self.group = group

    def __len__(self) -> int:
        n = len(self.loader)
        return n // self.group * self.group if self.train else n

    def __iter__(self) -> Iterator[Batch]:
        for x, y in itertools.islice(self.loader, len(self)):
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            yield self.transform(x, self.train), y


Loader = TensorLoader | StreamLoader


@dataclass
class Data:
    train: Loader
    val: Loader
    test: Loader | None
    num_classes: int
    image_shape: tuple[int, int, int]
    transform: BatchTransform  # shared by all loaders; set .channels_last once the model is known


def build_data(config: dict[str, Any], device: torch.device) -> Data:
    """Load `config["dataset"]`, carve the seeded validation split, and wrap loaders."""
    info = DATASETS[setting(config, "dataset")]
    splits = info.load(config)
    seed = int(setting(config, "split_seed"))
    train, val = carve_subsets(
        splits.train, float(setting(config, "val_fraction")), seed, config.get("train_subset"), config.get("val_subset")
    )
    test = subsample(splits.test, config.get("test_subset"), seed, "test_subset") if splits.test is not None else None
    transform = BatchTransform(
        splits.mean,
        splits.std,
        crop_padding=int(_or(config.get("aug_crop_padding"), info.crop_padding)),
        hflip=bool(_or(config.get("aug_hflip"), info.hflip)),
        cutout=int(config.get("aug_cutout") or 0),
    )
    batch_size, group = int(setting(config, "batch_size")), int(setting(config, "accum_steps"))
    eval_batch = int(config.get("eval_batch_size") or 2 * batch_size)

    def loader(data: Split | Dataset[Any], train: bool) -> Loader:
        size = batch_size if train else eval_batch
        if isinstance(data, Split):
            return TensorLoader(data.to(device), size, transform, train=train, group=group)
        workers = int(_or(config.get("num_workers"), 2))
        if multiprocessing.current_process().daemon:  # daemonic trial workers may not fork children
            workers = 0
        return StreamLoader(data, size, transform, device, train=train, group=group, num_workers=workers)

    data = Data(
        loader(train, True),
        loader(val, False),
        loader(test, False) if test is not None else None,
        splits.num_classes,
        splits.image_shape,
        transform,
    )
    if len(data.train) == 0:
        raise ValueError(
            f"{config.get('dataset')}: {len(train)} training samples are fewer than one optimizer step "
            f"(batch_size*accum_steps = {batch_size * group}); lower batch_size or accum_steps"
        )
    return data


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value
