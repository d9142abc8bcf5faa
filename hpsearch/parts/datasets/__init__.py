"""The built-in recipe's data: ``formats`` (one reader per on-disk format and the ``DATASETS``
registry), ``splits`` (seeded validation split and class-stratified subsets), ``loaders`` (batches
augmented on the device). User objectives read the same files through ``hpsearch.data``."""

from __future__ import annotations

from hpsearch.parts.datasets.formats import (
    DATASETS,
    FASHION_MNIST,
    MNIST,
    SYSTEM_DATASETS,
    DatasetInfo,
    dataset_problems,
    prepare_dataset,
    read_idx,
)
from hpsearch.parts.datasets.loaders import BatchTransform, Data, StreamLoader, TensorLoader, build_data
from hpsearch.parts.datasets.splits import Split, Splits, carve, carve_subsets, subsample, subsample_index

__all__ = [
    "DATASETS",
    "FASHION_MNIST",
    "MNIST",
    "SYSTEM_DATASETS",
    "BatchTransform",
    "Data",
    "DatasetInfo",
    "Split",
    "Splits",
    "StreamLoader",
    "TensorLoader",
    "build_data",
    "carve",
    "carve_subsets",
    "dataset_problems",
    "prepare_dataset",
    "read_idx",
    "subsample",
    "subsample_index",
]
