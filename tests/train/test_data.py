from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from hpsearch.train.data import (
    BatchTransform,
    Split,
    TensorLoader,
    build_data,
    cutout,
    random_crop,
    random_hflip,
)
from objectives.image_classification import train

CPU = torch.device("cpu")
TINY = {"model": "mlp", "mlp_hidden": [16], "batch_size": 8, "epochs": 1, "evaluate_test": True}


def _images(rng: np.random.Generator, n: int, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 256, (n, *shape), dtype=np.uint8)


def _write_pickle(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(obj))


def write_cifar10(root: Path, per_batch: int = 12) -> np.ndarray:
    """cifar-10-batches-py as torchvision extracts it: pickles of N×3072 rows (R, G, B planes)."""
    rng = np.random.default_rng(0)
    base, first = root / "cifar-10-batches-py", None
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = _images(rng, per_batch, (3072,))
        labels = [int(v) for v in rng.integers(0, 10, per_batch)]
        _write_pickle(base / name, {b"batch_label": name.encode(), b"labels": labels, b"data": data})
        first = data if first is None else first
    _write_pickle(base / "batches.meta", {b"label_names": [f"c{i}".encode() for i in range(10)]})
    return first


def write_cifar100(root: Path) -> None:
    rng = np.random.default_rng(1)
    base = root / "cifar-100-python"
    for name, n in (("train", 60), ("test", 20)):
        fine = [int(v) for v in rng.integers(0, 100, n)]
        coarse = [f // 5 for f in fine]
        _write_pickle(base / name, {b"data": _images(rng, n, (3072,)), b"fine_labels": fine, b"coarse_labels": coarse})
    _write_pickle(base / "meta", {b"fine_label_names": [b"x"] * 100, b"coarse_label_names": [b"y"] * 20})


def write_idx(path: Path, array: np.ndarray) -> None:
    """IDX: big-endian magic 0x0000 08 <ndim> (08 = uint8), then one uint32 per dimension."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def write_mnist(root: Path, folder: str = "MNIST") -> None:
    rng = np.random.default_rng(2)
    raw = root / folder / "raw"
    for prefix, n in (("train", 50), ("t10k", 16)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte", _images(rng, n, (28, 28)))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n))


def write_imagefolder(root: Path) -> None:
    rng = np.random.default_rng(3)
    for split, n in (("train", 10), ("val", 3)):
        for label in ("cat", "dog", "emu"):
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(n):
                Image.fromarray(_images(rng, 1, (12, 20, 3))[0]).save(folder / f"{i}.png")


def test_cifar10_files_load_in_channel_plane_order_and_train(tmp_path: Path, reporter_cls) -> None:
    first = write_cifar10(tmp_path)
    config = {**TINY, "dataset": "cifar10", "data_root": str(tmp_path), "val_fraction": 0.2}
    data = build_data(config, CPU)
    train_split, val_split = data.train.split, data.val.split
    assert train_split.images.shape == (48, 3, 32, 32) and len(val_split) == 12
    assert data.test.split.images.shape == (12, 3, 32, 32) and data.num_classes == 10
    all_images = torch.cat([train_split.images, val_split.images])
    expected = torch.from_numpy(first[0].reshape(3, 32, 32))  # row 0 of data_batch_1
    assert any(torch.equal(img, expected) for img in all_images)
    result = train(config, reporter_cls())
    assert 0.0 <= result["test_acc"] <= 1.0 and result["epochs"] == 1


def test_cifar100_files_load_with_fine_labels(tmp_path: Path, reporter_cls) -> None:
    write_cifar100(tmp_path)
    config = {**TINY, "dataset": "cifar100", "data_root": str(tmp_path)}
    data = build_data(config, CPU)
    assert data.num_classes == 100 and len(data.train.split) + len(data.val.split) == 60
    assert int(data.train.split.labels.max()) >= 20  # fine (0..99), not coarse (0..19), labels
    reporter = reporter_cls()
    assert "test_acc" in train(config, reporter) and reporter.epochs == [1]


@pytest.mark.parametrize(("dataset", "folder"), [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_mnist_idx_files_load_and_train(tmp_path: Path, reporter_cls, dataset: str, folder: str) -> None:
    write_mnist(tmp_path, folder)
    config = {**TINY, "dataset": dataset, "data_root": str(tmp_path)}
    data = build_data(config, CPU)
    assert data.image_shape == (1, 28, 28) and data.train.split.images.dtype == torch.uint8
    assert len(data.train.split) == 45 and len(data.test.split) == 16
    assert "test_acc" in train(config, reporter_cls())


def test_imagefolder_resizes_and_uses_val_folder_as_test(tmp_path: Path, reporter_cls) -> None:
    write_imagefolder(tmp_path)
    config = {**TINY, "dataset": "imagefolder", "data_root": str(tmp_path), "image_size": 16, "num_workers": 0}
    data = build_data(config, CPU)
    x, y = next(iter(data.train))
    assert x.shape == (8, 3, 16, 16) and x.dtype == torch.float32 and data.num_classes == 3
    assert len(data.test.loader.dataset) == 9
    assert "test_acc" in train(config, reporter_cls())


def test_digits_has_separate_seeded_test_split() -> None:
    data = build_data({"dataset": "digits", "batch_size": 64}, CPU)
    sizes = len(data.train.split), len(data.val.split), len(data.test.split)
    assert sum(sizes) == 1797 and sizes[2] == 359 and data.image_shape == (1, 8, 8)
    again = build_data({"dataset": "digits", "batch_size": 64}, CPU)
    assert torch.equal(data.val.split.images, again.val.split.images)
    other = build_data({"dataset": "digits", "batch_size": 64, "split_seed": 1}, CPU)
    assert not torch.equal(data.val.split.images, other.val.split.images)


def test_random_crop_is_a_shifted_window_of_the_zero_padded_image() -> None:
    torch.manual_seed(0)
    x = torch.arange(2 * 3 * 6 * 6, dtype=torch.int64).reshape(2, 3, 6, 6).to(torch.uint8) + 1
    out = random_crop(x, 2)
    padded = torch.nn.functional.pad(x, (2,) * 4)
    for i in range(2):
        windows = [padded[i, :, dy : dy + 6, dx : dx + 6] for dy in range(5) for dx in range(5)]
        assert any(torch.equal(out[i], w) for w in windows)


def test_hflip_returns_each_image_or_its_mirror() -> None:
    torch.manual_seed(0)
    x = torch.randint(0, 255, (64, 1, 4, 4), dtype=torch.uint8)
    out = random_hflip(x)
    flipped = [torch.equal(o, xi.flip(2)) for o, xi in zip(out, x)]
    same = [torch.equal(o, xi) for o, xi in zip(out, x)]
    assert all(f or s for f, s in zip(flipped, same)) and 10 < sum(flipped) < 54


def test_cutout_zeroes_at_most_a_size_by_size_square() -> None:
    torch.manual_seed(0)
    out = cutout(torch.ones(32, 3, 8, 8), 4)
    zeros = (out[:, 0] == 0).sum((1, 2))
    assert int(zeros.max()) == 16 and int(zeros.min()) >= 4  # clipped at the border
    assert torch.equal(out[:, 0] == 0, out[:, 2] == 0)  # same square in every channel


def test_train_loader_drops_the_incomplete_optimizer_step() -> None:
    split = Split(torch.zeros(150, 1, 2, 2, dtype=torch.uint8), torch.zeros(150, dtype=torch.long))
    loader = TensorLoader(split, 32, BatchTransform((0.0,), (1.0,)), train=True, group=4)
    sizes = [len(y) for _, y in loader]
    assert sizes == [32, 32, 32, 32]  # 150 samples: one step of 4×32; the other 22 wait for the next epoch
