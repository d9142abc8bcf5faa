"""Dataset helpers for your own objective: IDX files, MNIST / Fashion-MNIST, class-stratified subsets.

    from hpsearch import data

    train_x, train_y, test_x, test_y = data.load_fashion_mnist("data")  # uint8 N×28×28, int64 N
    keep = data.stratified_subset(train_y, 3000, seed=0)                 # indices, every class in proportion
    images = data.read_idx("data/fashion-mnist/t10k-images-idx3-ubyte.gz")

Arrays are read once per process while their file is unchanged (same size and modification
time), so the trials a worker runs one after another share them; they are read-only (copy
before writing into them). The same readers feed the built-in objective
(hpsearch/parts/datasets/). Importing this module does not import torch; the functions do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["load_fashion_mnist", "load_mnist", "read_idx", "stratified_subset"]

Arrays = tuple["np.ndarray", "np.ndarray", "np.ndarray", "np.ndarray"]


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file of unsigned bytes (LeCun's MNIST format; gzipped when the name ends in .gz):
    images as N×H×W uint8, labels as N uint8. Raises ValueError naming the file when it is not one."""
    import gzip

    from hpsearch.parts.datasets import read_idx as read

    found = Path(path)
    with (gzip.open if found.suffix == ".gz" else open)(found, "rb") as f:
        header = f.read(4)
    if len(header) < 4 or header[:3] != b"\x00\x00\x08" or header[3] not in (1, 3):
        raise ValueError(f"{found}: not an IDX file of unsigned bytes with 1 or 3 dimensions")
    return read(found, header[3])


def load_mnist(root: str | Path = "data") -> Arrays:
    """MNIST's (train images, train labels, test images, test labels) from the first folder holding
    the four idx files (each .gz or not): ``root/mnist``, ``root/MNIST/raw``, ``root``."""
    from hpsearch.parts.datasets import MNIST

    return _load(MNIST, root)


def load_fashion_mnist(root: str | Path = "data") -> Arrays:
    """Fashion-MNIST as ``load_mnist``: ``root/fashion-mnist``, ``root/FashionMNIST/raw``, ``root``,
    then Debian's /usr/share/datasets/fashion-mnist."""
    from hpsearch.parts.datasets import FASHION_MNIST

    return _load(FASHION_MNIST, root)


def _load(dataset: Any, root: str | Path) -> Arrays:
    from hpsearch.parts.datasets import read_idx as read

    config = {"data_root": str(root), "dataset": dataset.folder}
    files = dataset.files(config)
    if files is None:
        raise FileNotFoundError(dataset.missing(config))
    train_x, train_y, test_x, test_y = (read(f, 3 if i % 2 == 0 else 1) for i, f in enumerate(files))
    for images, labels, name in ((train_x, train_y, "train"), (test_x, test_y, "test")):
        if len(images) != len(labels):
            raise ValueError(f"{dataset.folder} {name}: {len(images)} images but {len(labels)} labels")
    return train_x, _labels(train_y), test_x, _labels(test_y)


def _labels(labels: np.ndarray) -> np.ndarray:
    import numpy as np

    out: np.ndarray = labels.astype(np.int64)
    out.flags.writeable = False  # as the images: shared by the trials of this process
    return out


def stratified_subset(labels: Any, n: int, seed: int = 0) -> np.ndarray:
    """Indices (sorted) of ``n`` items with each class in proportion to its share; for one seed a
    smaller subset is contained in a larger one. ``labels``: a 1-D array or tensor of class ids."""
    import numpy as np
    import torch

    tensor = torch.from_numpy(np.array(labels, dtype=np.int64))  # a copy: the cached labels are read-only
    from hpsearch.parts.datasets import subsample_index

    index: np.ndarray = subsample_index(len(tensor), tensor, n, seed, "n").numpy()
    return index
