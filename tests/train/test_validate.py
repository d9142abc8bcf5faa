from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hpsearch.objectives.image_classification import validate
from hpsearch.parts.datasets import formats


def test_default_config_is_valid() -> None:
    assert validate({}) == []


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"dataset": "cifar01"}, ["unknown dataset 'cifar01' (did you mean 'cifar10'?)", "imagefolder"]),
        ({"model": "resnet2O"}, ["unknown model 'resnet2O' (did you mean 'resnet20'?)", "torchvision"]),
        ({"optimizer": "adamww"}, ["unknown optimizer 'adamww' (did you mean 'adamw'?)", "rmsprop"]),
        ({"schedule": "cosin"}, ["unknown schedule 'cosin' (did you mean 'cosine'?)", "onecycle"]),
        ({"amp": "bf61"}, ["unknown amp value 'bf61'", "auto, bf16, fp16, off"]),
        ({"learning_rate": 0.1}, ["unknown config key 'learning_rate'"]),
        ({"momentom": 0.9}, ["unknown config key 'momentom' (did you mean 'momentum'?)"]),
    ],
)
def test_unknown_names_list_known_ones_with_a_suggestion(config: dict, expected: list[str]) -> None:
    [message] = validate(config)
    assert all(part in message for part in expected), message


def test_bad_numbers_are_all_reported_at_once() -> None:
    problems = validate(
        {
            "batch_size": 0,
            "accum_steps": 0,
            "epochs": 0,
            "lr": 0.0,
            "val_fraction": 1.0,
            "label_smoothing": -0.1,
            "synthetic_shape": [3, 32],
            "download": "yes",
            "flush_denormal": "no",
            "fused_optimizer": "fast",
        }
    )
    expected = [
        "batch_size must be an integer >= 1, got 0",
        "accum_steps must be an integer >= 1, got 0",
        "epochs must be an integer >= 1, got 0",
        "lr must be a number > 0, got 0.0",
        "val_fraction must be a number > 0 and < 1, got 1.0",
        "label_smoothing must be a number >= 0 and < 1, got -0.1",
        "synthetic_shape must be [channels, height, width]",
        "download must be true or false, got 'yes'",
        "flush_denormal must be true or false, got 'no'",
        "fused_optimizer must be true or false, got 'fast'",
    ]
    assert all(any(e in p for p in problems) for e in expected), problems
    assert validate({"batch_size": 32.5})[0] == "batch_size must be an integer, got 32.5"
    assert "write 1.0e-3" in validate({"lr": "1e-3"})[0]  # how PyYAML reads an unquoted 1e-3
    assert validate({"_note": "left for the caller"}) == []


def test_warmup_epochs_and_fraction_together_is_an_error() -> None:
    [message] = validate({"warmup_epochs": 1, "warmup_fraction": 0.1})
    assert "warmup_epochs or warmup_fraction, not both" in message


def test_missing_cifar10_says_where_it_looked_and_how_to_get_it(tmp_path: Path, monkeypatch) -> None:
    def load(config: dict) -> None:
        raise AssertionError("validate loaded the data")  # path checks only, no loading

    monkeypatch.setitem(formats.DATASETS, "cifar10", dataclasses.replace(formats.DATASETS["cifar10"], load=load))
    [message] = validate({"dataset": "cifar10", "data_root": str(tmp_path)})
    assert f"cifar10: no data under {tmp_path / 'cifar-10-batches-py'}" in message
    assert "set fixed.download: true to download it, or place the extracted archive there" in message
    assert validate({"dataset": "cifar10", "data_root": str(tmp_path), "download": True}) == []


def test_missing_relative_data_root_names_the_absolute_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    [message] = validate({"dataset": "cifar100"})
    assert f"no data under data/cifar-100-python (absolute: {tmp_path / 'data' / 'cifar-100-python'})" in message


def test_missing_imagefolder_names_the_layout(tmp_path: Path) -> None:
    [message] = validate({"dataset": "imagefolder", "data_root": str(tmp_path)})
    assert str(tmp_path / "train") in message and "<class>" in message


def test_missing_fashion_mnist_names_every_folder_it_tried(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(formats, "SYSTEM_DATASETS", tmp_path / "system")
    [message] = validate({"dataset": "fashion_mnist", "data_root": str(tmp_path / "data")})
    tried = [
        tmp_path / "data" / "fashion-mnist",
        tmp_path / "data" / "FashionMNIST" / "raw",
        tmp_path / "data",
        tmp_path / "system" / "fashion-mnist",
    ]
    assert f"looked in {', '.join(map(str, tried))};" in message
    assert all(f"{stem}" in message for stem in ("train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"))
    assert "install Debian's dataset-fashion-mnist" in message and "download: true" in message


def test_missing_mnist_does_not_promise_a_debian_package(tmp_path: Path) -> None:
    [message] = validate({"dataset": "mnist", "data_root": str(tmp_path)})
    assert f"looked in {tmp_path / 'mnist'}, {tmp_path / 'MNIST' / 'raw'}, {tmp_path};" in message
    assert "Debian" not in message and "/usr/share" not in message


def test_subset_sizes_must_be_whole_numbers_of_images() -> None:
    problems = validate({"train_subset": 0, "val_subset": 0.5, "test_subset": "all"})
    assert problems == [
        "train_subset must be an integer >= 1, got 0",
        "val_subset must be an integer, got 0.5",
        "test_subset must be an integer, got 'all'",
    ]
    assert validate({"train_subset": 1000, "val_subset": None}) == []
