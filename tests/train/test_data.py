from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from hpsearch.objectives.image_classification import train
from hpsearch.parts.datasets import formats
from hpsearch.parts.datasets.loaders import BatchTransform, TensorLoader, build_data, cutout, random_crop, random_hflip
from hpsearch.parts.datasets.splits import Split

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
    """IDX: big-endian magic 0x0000 08 <ndim> (08 = uint8: 2051 images, 2049 labels), then one
    uint32 per dimension; gzipped like the published files when the name ends in .gz."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    raw = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)


def write_mnist(root: Path, folder: str = "MNIST/raw", suffix: str = "", n_train: int = 50) -> dict[str, np.ndarray]:
    """The four idx files in root/folder; returns what was written, keyed by file stem."""
    rng = np.random.default_rng(2)
    written = {}
    for prefix, n in (("train", n_train), ("t10k", 16)):
        written[f"{prefix}-images"] = _images(rng, n, (28, 28))
        written[f"{prefix}-labels"] = np.arange(n) % 10  # every class, in equal shares
        write_idx(root / folder / f"{prefix}-images-idx3-ubyte{suffix}", written[f"{prefix}-images"])
        write_idx(root / folder / f"{prefix}-labels-idx1-ubyte{suffix}", written[f"{prefix}-labels"])
    return written


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


@pytest.fixture(autouse=True)
def no_system_datasets(tmp_path: Path, monkeypatch) -> Path:
    """Debian's /usr/share/datasets stands in as an empty folder, so these tests read only their own files."""
    system = tmp_path / "usr-share-datasets"
    monkeypatch.setattr(formats, "SYSTEM_DATASETS", system)
    return system


@pytest.mark.parametrize(("dataset", "folder"), [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_mnist_idx_files_load_and_train(tmp_path: Path, reporter_cls, dataset: str, folder: str) -> None:
    write_mnist(tmp_path, f"{folder}/raw")
    config = {**TINY, "dataset": dataset, "data_root": str(tmp_path)}
    data = build_data(config, CPU)
    assert data.image_shape == (1, 28, 28) and data.train.split.images.dtype == torch.uint8
    assert len(data.train.split) == 45 and len(data.test.split) == 16
    assert "test_acc" in train(config, reporter_cls())


@pytest.mark.parametrize(
    ("folder", "suffix"),
    [("fashion-mnist", ".gz"), ("FashionMNIST/raw", ".gz"), ("FashionMNIST/raw", ""), (".", ".gz")],
    ids=["debian-layout", "torchvision-gz", "torchvision-plain", "flat"],
)
def test_fashion_mnist_reads_idx_files_pixel_for_pixel(tmp_path: Path, folder: str, suffix: str) -> None:
    written = write_mnist(tmp_path / "data", folder, suffix)
    config = {"dataset": "fashion_mnist", "data_root": str(tmp_path / "data"), "val_fraction": 0.2, "batch_size": 8}
    data = build_data(config, CPU)
    train, val, test = data.train.split, data.val.split, data.test.split
    assert (len(train), len(val), len(test)) == (40, 10, 16) and data.image_shape == (1, 28, 28)
    assert torch.equal(test.images[:, 0], torch.from_numpy(written["t10k-images"]))  # test split is not shuffled
    assert test.labels.tolist() == written["t10k-labels"].tolist()
    first = torch.from_numpy(written["train-images"][0])
    assert any(torch.equal(img[0], first) for img in torch.cat([train.images, val.images]))


def test_system_folder_is_read_when_data_root_has_nothing(tmp_path: Path, no_system_datasets: Path) -> None:
    written = write_mnist(no_system_datasets, "fashion-mnist", ".gz")
    data = build_data({"dataset": "fashion_mnist", "data_root": str(tmp_path / "empty"), "batch_size": 8}, CPU)
    assert data.test.split.labels.tolist() == written["t10k-labels"].tolist()


def test_download_asks_torchvision_only_when_no_folder_has_the_files(tmp_path: Path, monkeypatch) -> None:
    import torchvision.datasets

    calls = []

    def fake_download(root: str, download: bool) -> None:  # writes what torchvision's download leaves
        calls.append((root, download))
        write_mnist(Path(root), "FashionMNIST/raw", ".gz")

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", fake_download)
    config = {"dataset": "fashion_mnist", "data_root": str(tmp_path), "download": True, "batch_size": 8}
    assert len(build_data(config, CPU).test.split) == 16 and calls == [(str(tmp_path), True)]
    assert len(build_data(config, CPU).test.split) == 16 and len(calls) == 1  # the second time the files are there


def test_a_folder_missing_one_file_is_passed_over_for_a_complete_one(tmp_path: Path) -> None:
    write_mnist(tmp_path, "fashion-mnist", ".gz", n_train=30)
    (tmp_path / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    write_mnist(tmp_path, "FashionMNIST/raw", n_train=60)
    data = build_data({"dataset": "fashion_mnist", "data_root": str(tmp_path), "val_fraction": 0.5, "batch_size": 8}, CPU)
    assert len(data.train.split) + len(data.val.split) == 60


def test_a_file_that_is_not_idx_is_named_in_the_error(tmp_path: Path) -> None:
    write_mnist(tmp_path, "fashion-mnist", ".gz")
    bad = tmp_path / "fashion-mnist" / "train-labels-idx1-ubyte.gz"
    bad.write_bytes(gzip.compress(b"<html>not found</html>"))
    with pytest.raises(ValueError, match=f"{bad}: not an IDX file of 1-D unsigned bytes"):
        build_data({"dataset": "fashion_mnist", "data_root": str(tmp_path), "batch_size": 8}, CPU)


def test_images_and_labels_of_different_lengths_are_refused(tmp_path: Path) -> None:
    write_mnist(tmp_path, "fashion-mnist")
    write_idx(tmp_path / "fashion-mnist" / "t10k-labels-idx1-ubyte", np.zeros(15))
    with pytest.raises(ValueError, match="holds 16 images but .*t10k-labels-idx1-ubyte 15 labels"):
        build_data({"dataset": "fashion_mnist", "data_root": str(tmp_path), "batch_size": 8}, CPU)


DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.slow
@pytest.mark.skipif(not DEBIAN_FASHION.is_dir(), reason=f"{DEBIAN_FASHION} absent: apt-get install dataset-fashion-mnist")
def test_debian_fashion_mnist_on_a_subset_has_the_published_statistics_and_learns(tmp_path: Path, monkeypatch, reporter_cls) -> None:
    monkeypatch.setattr(formats, "SYSTEM_DATASETS", DEBIAN_FASHION.parent)
    config = {
        "dataset": "fashion_mnist",
        "data_root": str(tmp_path),
        "train_subset": 2000,
        "val_subset": 1000,
        "test_subset": 1000,
        "model": "cnn",
        "width": 8,
        "optimizer": "adamw",
        "lr": 3e-3,
        "batch_size": 64,
        "epochs": 3,
        "evaluate_test": True,
    }
    data = build_data(config, CPU)
    assert (len(data.train.split), len(data.val.split), len(data.test.split)) == (2000, 1000, 1000)
    counts = torch.bincount(data.train.split.labels)
    assert len(counts) == 10 and int(counts.min()) >= 199 and int(counts.max()) <= 201  # stratified; 6,000 a class
    pixels = data.train.split.images.float() / 255
    assert abs(pixels.mean().item() - 0.2860) < 0.01 and abs(pixels.std().item() - 0.3530) < 0.01
    result = train(config, reporter_cls())
    assert result["test_acc"] > 0.7, result  # 10 classes: chance is 0.1


@pytest.mark.slow
def test_subsets_are_stratified_seeded_and_nested() -> None:
    def train_split(n: int | None, seed: int = 0) -> Split:
        config = {"dataset": "synthetic", "synthetic_samples": 2000, "train_subset": n, "split_seed": seed, "batch_size": 16}
        return build_data(config, CPU).train.split

    full, small, large = train_split(None), train_split(100), train_split(500)
    assert (len(full), len(small), len(large)) == (1800, 100, 500)
    shares = torch.bincount(full.labels, minlength=10).double() / len(full)
    assert (torch.bincount(small.labels, minlength=10) - 100 * shares).abs().max() < 1  # within one image
    as_rows = lambda s: {tuple(x.flatten().tolist()) for x in s.images}  # noqa: E731
    assert as_rows(small) <= as_rows(large)
    assert torch.equal(small.images, train_split(100).images)
    assert not torch.equal(small.images, train_split(100, seed=1).images)


def test_val_and_test_subsets_leave_the_other_splits_alone() -> None:
    base = {"dataset": "digits", "batch_size": 16}
    full = build_data(base, CPU)
    cut = build_data({**base, "val_subset": 50, "test_subset": 40, "train_subset": 300}, CPU)
    assert (len(cut.train.split), len(cut.val.split), len(cut.test.split)) == (300, 50, 40)
    untouched = build_data({**base, "train_subset": 300}, CPU)
    assert torch.equal(untouched.val.split.images, full.val.split.images)
    assert torch.equal(untouched.test.split.images, full.test.split.images)


@pytest.mark.parametrize(("train_n", "val_n"), [(None, None), (300, None), (None, 40), (300, 40)])
def test_carving_subsets_in_one_copy_keeps_the_very_images_of_carve_then_subsample(train_n, val_n) -> None:
    """build_data indexes the loaded split once (carve_subsets); the images must be those the
    two-step carve + subsample picks, so earlier studies' subsets stay the same."""
    from hpsearch.parts.datasets import carve, carve_subsets, subsample

    gen = torch.Generator().manual_seed(0)
    data = Split(torch.randint(0, 256, (1000, 1, 4, 4), dtype=torch.uint8, generator=gen), torch.randint(0, 10, (1000,), generator=gen))
    for _ in range(2):  # the second call is served from the index cache
        train, val = carve_subsets(data, 0.2, 3, train_n, val_n)
        rest, held = carve(data, 0.2, 3)
        expected = subsample(rest, train_n, 3, "train_subset"), subsample(held, val_n, 3, "val_subset")
        for got, want in zip((train, val), expected, strict=True):
            assert torch.equal(got.images, want.images) and torch.equal(got.labels, want.labels)
    assert len(train) == (train_n or 800) and len(val) == (val_n or 200)


def test_a_subset_larger_than_its_split_is_an_error() -> None:
    with pytest.raises(ValueError, match="val_subset=500 is more than the 144 images in that split"):
        build_data({"dataset": "digits", "val_subset": 500}, CPU)


def test_imagefolder_subset_is_stratified_by_folder(tmp_path: Path) -> None:
    write_imagefolder(tmp_path)
    config = {
        "dataset": "imagefolder",
        "data_root": str(tmp_path),
        "image_size": 8,
        "num_workers": 0,
        "val_fraction": 0.1,
        "train_subset": 9,
        "batch_size": 3,
    }
    subset = build_data(config, CPU).train.loader.dataset
    counts = np.bincount([label for _, label in subset], minlength=3)
    assert counts.sum() == 9 and counts.max() - counts.min() <= 1, counts  # ~9 per class in the 27


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
    flipped = [torch.equal(o, xi.flip(2)) for o, xi in zip(out, x, strict=True)]
    same = [torch.equal(o, xi) for o, xi in zip(out, x, strict=True)]
    assert all(f or s for f, s in zip(flipped, same, strict=True)) and 10 < sum(flipped) < 54


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
