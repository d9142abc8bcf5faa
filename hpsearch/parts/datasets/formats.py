"""One reader per on-disk format: IDX (MNIST, Fashion-MNIST), CIFAR pickles, ImageFolder,
scikit-learn's digits, synthetic; the `DATASETS` registry the spec and the recipe read.

MNIST and Fashion-MNIST are read straight from their idx files (gzipped or not), offline from
Debian's /usr/share/datasets when data_root has none.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import math
import pickle
import shutil
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hpsearch.parts.datasets.splits import Split, Splits, carve
from hpsearch.parts.names import unknown_name
from hpsearch.parts.settings import setting


@dataclass(frozen=True)
class DatasetInfo:
    load: Callable[[dict[str, Any]], Splits]
    missing: Callable[[dict[str, Any]], str | None]  # cheap file check; message or None
    crop_padding: int  # default aug_crop_padding, pixels
    hflip: bool  # default aug_hflip
    fetch: Callable[[dict[str, Any]], str | None] | None = None  # download: true, before a study starts; message or None


def _channel_stats(images: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    x = images.float() / 255
    return tuple(x.mean((0, 2, 3)).tolist()), tuple(x.std((0, 2, 3)).tolist())


def _root(config: dict[str, Any]) -> Path:
    return Path(setting(config, "data_root"))


def _where(path: Path) -> str:
    return str(path) if path.is_absolute() else f"{path} (absolute: {path.resolve()})"


_FETCHED: dict[tuple[str, ...], str | None] = {}  # fetch_once's outcomes in this process


DOWNLOAD_TIMEOUT_S = 30  # per socket operation: a host that stopped answering, not a slow download


def fetch_once(download: Callable[[], None], creates: list[Path]) -> str | None:
    """Run ``download`` once per process (per ``creates``); on failure remove what it created (the
    paths in ``creates`` and missing parents of the first) and return the error (``URLError: ...``)."""
    key = tuple(str(p.resolve()) for p in creates)
    if key not in _FETCHED:
        top = creates[0]
        while not top.parent.exists():
            top = top.parent  # makedirs creates the missing parents too
        new = [p for p in [top, *creates] if not p.exists()]
        before = socket.getdefaulttimeout()
        socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
        try:
            download()
            _FETCHED[key] = None
        except Exception as exc:  # noqa: BLE001 - URLError, a checksum RuntimeError, OSError: all end in the same line
            _FETCHED[key] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
            for path in new:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        finally:
            socket.setdefaulttimeout(before)
    return _FETCHED[key]


def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1797 8×8 digits, values 0..16; read from its csv to skip a 2 s import."""
    spec = importlib.util.find_spec("sklearn")
    locations = spec.submodule_search_locations if spec else None
    csv = Path(locations[0]) / "datasets" / "data" / "digits.csv.gz" if locations else None
    if csv is None or not csv.is_file():
        from sklearn.datasets import load_digits

        digits = load_digits()
        return digits.images, digits.target
    table = np.loadtxt(csv, delimiter=",")  # 64 pixel columns, then the label
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def _load_digits(config: dict[str, Any]) -> Splits:
    pixels, target = _digits_arrays()
    images = torch.from_numpy(np.round(pixels * (255 / 16))).to(torch.uint8)
    full = Split(images.unsqueeze(1), torch.from_numpy(target).long())
    train, test = carve(full, 0.2, int(setting(config, "split_seed")))  # fixed 20% test
    mean, std = _channel_stats(train.images)
    return Splits(train, test, 10, (1, 8, 8), mean, std)


def _no_files_needed(config: dict[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class _Cifar:
    folder: str  # as extracted from torchvision's archive
    train_files: tuple[str, ...]
    test_file: str
    num_classes: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    torchvision_class: str  # supplies url and md5 for download

    def absent(self, config: dict[str, Any]) -> list[str]:
        base = _root(config) / self.folder
        return [f for f in (*self.train_files, self.test_file) if not (base / f).is_file()]

    def missing(self, config: dict[str, Any]) -> str | None:
        if config.get("download"):
            return None
        base = _root(config) / self.folder
        absent = self.absent(config)
        if not absent:
            return None
        return (
            f"{config.get('dataset')}: no data under {_where(base)} (missing {', '.join(absent)}); "
            f"set fixed.download: true to download it, or place the extracted archive there"
        )

    def fetch(self, config: dict[str, Any]) -> str | None:
        if not self.absent(config):
            return None
        root = _root(config)
        failed = fetch_once(lambda: self.download(root), [root, root / self.archive()])
        if failed is None:
            return None
        return (
            f"{config.get('dataset')}: fixed.download is true but the download failed ({failed}); without the network, "
            f"put the extracted {self.folder}/ under {_where(root)} and set fixed.download: false"
        )

    def archive(self) -> str:
        from torchvision import datasets

        filename: str = getattr(datasets, self.torchvision_class).filename
        return filename

    def download(self, root: Path) -> None:
        from torchvision import datasets
        from torchvision.datasets.utils import download_and_extract_archive

        tv = getattr(datasets, self.torchvision_class)
        download_and_extract_archive(tv.url, str(root), filename=tv.filename, md5=tv.tgz_md5)

    def load(self, config: dict[str, Any]) -> Splits:
        root = _root(config)
        if config.get("download") and self.absent(config):
            self.download(root)
        train = _read_cifar([root / self.folder / f for f in self.train_files])
        test = _read_cifar([root / self.folder / self.test_file])
        return Splits(train, test, self.num_classes, (3, 32, 32), self.mean, self.std)


def _read_cifar(paths: list[Path]) -> Split:
    """Read CIFAR pickles directly: torchvision's class re-hashes every file on each load."""
    images, labels = [], []
    for path in paths:
        with open(path, "rb") as f:
            entry = pickle.load(f, encoding="latin1")
        entry = {k.decode() if isinstance(k, bytes) else k: v for k, v in entry.items()}
        images.append(np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
    return Split(torch.from_numpy(np.concatenate(images)), torch.tensor(labels, dtype=torch.long))


CIFAR10 = _Cifar(
    "cifar-10-batches-py",
    tuple(f"data_batch_{i}" for i in range(1, 6)),
    "test_batch",
    10,
    (0.4914, 0.4822, 0.4465),
    (0.2470, 0.2435, 0.2616),
    "CIFAR10",
)


CIFAR100 = _Cifar("cifar-100-python", ("train",), "test", 100, (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762), "CIFAR100")


_IDX_STEMS = (  # each read as <stem>.gz or <stem>
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


_IDX_MAGIC = {3: 2051, 1: 2049}  # images (N×H×W) and labels (N) of unsigned bytes: 0x0000_08_<ndim>


SYSTEM_DATASETS = Path("/usr/share/datasets")  # where Debian's dataset-* packages install


def read_idx(path: Path, ndim: int) -> np.ndarray:
    """An IDX file of unsigned bytes (LeCun's MNIST format), gzipped when the name ends in .gz.

    Read once per process while the file is unchanged (same size and mtime): a process that runs
    trial after trial would otherwise unzip the 47 MB of Fashion-MNIST's train images for each,
    0.4 s a trial on a 2-core machine, more than a 3,000-image epoch of the MLP. The array is read-only."""
    stat = path.stat()
    return _read_idx(path.resolve(), ndim, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)  # the four files of a dataset, and one more dataset
def _read_idx(path: Path, ndim: int, size: int, mtime_ns: int) -> np.ndarray:
    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else None
    if magic != _IDX_MAGIC[ndim]:
        expected = _IDX_MAGIC[ndim]
        raise ValueError(f"{path}: not an IDX file of {ndim}-D unsigned bytes (magic {magic}, expected {expected})")
    shape = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    values = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)
    if values.size != math.prod(shape):
        raise ValueError(f"{path}: header says {shape} = {math.prod(shape)} values, file holds {values.size}")
    return values.reshape(shape)


@dataclass(frozen=True)
class _Mnist:
    """MNIST-format idx files, gzipped or not; the first folder holding all four is read."""

    torchvision_class: str  # also the folder torchvision uses: <data_root>/<class>/raw
    folder: str  # Debian's folder name under /usr/share/datasets, and ours under data_root
    debian_package: str | None  # None: Debian has no package for it
    mean: float
    std: float

    def folders(self, config: dict[str, Any]) -> list[Path]:
        root = _root(config)
        system = [SYSTEM_DATASETS / self.folder] if self.debian_package else []
        return [root / self.folder, root / self.torchvision_class / "raw", root, *system]

    def files(self, config: dict[str, Any]) -> list[Path] | None:
        """The four files (train images, labels, test images, labels) from the first complete folder."""
        for folder in self.folders(config):
            found = [next((p for p in (folder / f"{s}.gz", folder / s) if p.is_file()), None) for s in _IDX_STEMS]
            complete = [p for p in found if p is not None]
            if len(complete) == len(found):
                return complete
        return None

    def missing(self, config: dict[str, Any]) -> str | None:
        if config.get("download") or self.files(config):
            return None
        tried = ", ".join(_where(f) for f in self.folders(config))
        debian = f", install Debian's {self.debian_package}" if self.debian_package else ""
        return (
            f"{config.get('dataset')}: no folder holds all of {', '.join(_IDX_STEMS)} (each .gz or uncompressed); "
            f"looked in {tried}; set fixed.download: true to download it{debian}, or place the idx files in one of them"
        )

    def fetch(self, config: dict[str, Any]) -> str | None:
        if self.files(config):
            return None
        root = _root(config)
        failed = fetch_once(lambda: self.download(root), [root, root / self.torchvision_class])
        if failed is None:
            return None
        debian = f", install Debian's {self.debian_package}" if self.debian_package else ""
        return (
            f"{config.get('dataset')}: fixed.download is true but the download failed ({failed}); without the network, "
            f"put the four idx files in {_where(root / self.folder)}{debian} and set fixed.download: false"
        )

    def download(self, root: Path) -> None:
        from torchvision import datasets

        getattr(datasets, self.torchvision_class)(str(root), download=True)  # into <class>/raw

    def load(self, config: dict[str, Any]) -> Splits:
        files = self.files(config)
        if files is None and config.get("download"):
            self.download(_root(config))
            files = self.files(config)
        if files is None:
            raise FileNotFoundError(self.missing({**config, "download": False}))
        train, test = _idx_split(files[0], files[1]), _idx_split(files[2], files[3])
        return Splits(train, test, 10, (1, 28, 28), (self.mean,), (self.std,))


def _idx_split(images_file: Path, labels_file: Path) -> Split:
    images, labels = read_idx(images_file, 3), read_idx(labels_file, 1)
    if len(images) != len(labels):
        raise ValueError(f"{images_file} holds {len(images)} images but {labels_file} {len(labels)} labels")
    return Split(torch.from_numpy(images.copy()).unsqueeze(1), torch.from_numpy(labels.astype(np.int64)))


MNIST = _Mnist("MNIST", "mnist", None, 0.1307, 0.3081)


FASHION_MNIST = _Mnist("FashionMNIST", "fashion-mnist", "dataset-fashion-mnist", 0.2860, 0.3530)


IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _imagefolder_missing(config: dict[str, Any]) -> str | None:
    train = _root(config) / "train"
    if train.is_dir() and any(p.is_dir() for p in train.iterdir()):
        return None
    return (
        f"imagefolder: no class folders under {_where(train)}; place images as "
        f"{train}/<class>/<image> (and optionally {_root(config)}/val/<class>/... as the test split)"
    )


def _load_imagefolder(config: dict[str, Any]) -> Splits:
    from torchvision import datasets, transforms

    size = int(setting(config, "image_size"))
    to_tensor = transforms.Compose([transforms.Resize((size, size)), transforms.PILToTensor()])
    root = _root(config)
    train = datasets.ImageFolder(str(root / "train"), transform=to_tensor)
    test_dir = next((root / n for n in ("val", "test") if (root / n).is_dir()), None)
    test = datasets.ImageFolder(str(test_dir), transform=to_tensor) if test_dir else None
    if test is not None and test.classes != train.classes:
        raise ValueError(f"imagefolder: classes in {test_dir} {test.classes} differ from train {train.classes}")
    return Splits(train, test, len(train.classes), (3, size, size), IMAGENET_MEAN, IMAGENET_STD)


def _load_synthetic(config: dict[str, Any]) -> Splits:
    """Class prototypes plus Gaussian noise: learnable, sized like real data, no files."""
    c, h, w = (int(v) for v in setting(config, "synthetic_shape"))
    k, n = int(setting(config, "synthetic_classes")), int(setting(config, "synthetic_samples"))
    g = torch.Generator().manual_seed(int(setting(config, "split_seed")))
    prototypes = torch.rand(k, c, h, w, generator=g)
    labels = torch.randint(0, k, (n,), generator=g)
    noisy = prototypes[labels] + 0.25 * torch.randn(n, c, h, w, generator=g)  # noise sd, 0..1 scale
    images = (noisy.clamp(0, 1) * 255).round().to(torch.uint8)
    return Splits(Split(images, labels), None, k, (c, h, w), (0.5,) * c, (0.25,) * c)


DATASETS: dict[str, DatasetInfo] = {
    "digits": DatasetInfo(_load_digits, _no_files_needed, crop_padding=0, hflip=False),
    "cifar10": DatasetInfo(CIFAR10.load, CIFAR10.missing, crop_padding=4, hflip=True, fetch=CIFAR10.fetch),
    "cifar100": DatasetInfo(CIFAR100.load, CIFAR100.missing, crop_padding=4, hflip=True, fetch=CIFAR100.fetch),
    "mnist": DatasetInfo(MNIST.load, MNIST.missing, crop_padding=0, hflip=False, fetch=MNIST.fetch),
    "fashion_mnist": DatasetInfo(FASHION_MNIST.load, FASHION_MNIST.missing, crop_padding=0, hflip=False, fetch=FASHION_MNIST.fetch),
    "imagefolder": DatasetInfo(_load_imagefolder, _imagefolder_missing, crop_padding=0, hflip=True),
    "synthetic": DatasetInfo(_load_synthetic, _no_files_needed, crop_padding=0, hflip=False),
}


def dataset_problems(config: dict[str, Any]) -> list[str]:
    """Unknown dataset name or missing files; never reads the data."""
    name = setting(config, "dataset")
    if not (isinstance(name, str) and name in DATASETS):
        return [unknown_name("dataset", name, DATASETS)]
    problem = DATASETS[name].missing(config)
    return [problem] if problem else []


def prepare_dataset(config: dict[str, Any]) -> list[str]:
    """The objective's ``prepare`` hook: with ``download: true``, download missing files now, before
    a study starts (fetch_once), so a machine without the network gets one line, not a failed trial
    per config."""
    name = setting(config, "dataset")
    info = DATASETS.get(name) if isinstance(name, str) else None
    if info is None or info.fetch is None or not config.get("download"):
        return []
    problem = info.fetch(config)
    return [problem] if problem else []
