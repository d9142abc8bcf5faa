"""A user's own function objective: metric types, out of memory, unread keys, ``_final``,
``hpsearch.run`` and ``hpsearch.data``."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import hpsearch
from hpsearch import data
from hpsearch.tools.final_run import train
from hpsearch.trial.reporter import Reporter
from hpsearch.trial.run import COMPLETE, FAILED, run_trial

TOY = Path(__file__).resolve().parent / "fixtures" / "toy.py"


def test_tensor_and_numpy_metrics_reported_and_returned() -> None:
    def objective(config: dict[str, Any], reporter: Reporter) -> dict[str, Any]:
        reporter.report(1, {"val_acc": torch.tensor(0.25), "loss": np.float32(2.0)})
        return {"val_acc": np.float64(0.5), "loss": torch.tensor(1.5)}

    reporter = Reporter()
    outcome = run_trial(objective, {}, reporter, ["val_acc"])
    assert outcome.state == COMPLETE and outcome.values == [0.5] and outcome.metrics["loss"] == 1.5
    assert reporter.history == [{"epoch": 1, "val_acc": 0.25, "loss": 2.0}]


def _oom(config: dict[str, Any], reporter: Reporter) -> dict[str, float]:
    if config["batch_size"] > 16:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated on CPU)")
    reporter.report(1, {"val_acc": 0.5})
    return {"val_acc": 0.5, "ran_batch": config["batch_size"], "ran_accum": config["accum_steps"]}


def test_out_of_memory_without_accum_steps_fails_at_once_saying_what_to_do() -> None:
    outcome = run_trial(_oom, {"batch_size": 64, "accum_steps": 1}, Reporter(), ["val_acc"])
    assert outcome.state == FAILED and outcome.oom_retries == 0
    assert outcome.reason.startswith("failed: out of memory at batch_size=64: lower batch_size")
    assert "set fn.accum_steps = True" in outcome.reason


@pytest.mark.slow
def test_out_of_memory_with_accum_steps_declared_retries_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    def declared(config: dict[str, Any], reporter: Reporter) -> dict[str, float]:
        return _oom(config, reporter)

    declared.accum_steps = True  # type: ignore[attr-defined]
    outcome = run_trial(declared, {"batch_size": 64, "accum_steps": 1}, Reporter(), ["val_acc"])
    assert outcome.state == COMPLETE and outcome.oom_retries == 2
    assert outcome.metrics["ran_batch"] == 16 and outcome.metrics["ran_accum"] == 4
    assert outcome.attrs()["config"] == {"batch_size": 16, "accum_steps": 4}  # what actually ran, in the trial's attributes
    err = capsys.readouterr().err
    assert "out of memory at batch_size=64: retrying with batch_size=32 accum_steps=2" in err
    assert "out of memory at batch_size=32: retrying with batch_size=16 accum_steps=4" in err


def test_config_keys_never_read_are_named_once(capsys: pytest.CaptureFixture[str]) -> None:
    def reads_lr(config: dict[str, Any], reporter: Reporter) -> dict[str, float]:
        for epoch in (1, 2):
            reporter.report(epoch, {"val_acc": config["lr"] * epoch})
        return {"val_acc": 2 * config.get("lr", 0.0)}

    run_trial(reads_lr, {"lr": 0.1, "lr_decay_typo": 0.5, "epochs": 2, "_min_batch_size": 1}, Reporter(), ["val_acc"])
    err = capsys.readouterr().err
    assert err.count("never read") == 1 and "never read config key(s) epochs, lr_decay_typo" in err

    def copies(config: dict[str, Any], reporter: Reporter) -> dict[str, float]:
        settings = dict(config)  # a copy reads every key: nothing to say
        reporter.report(1, {"val_acc": settings["lr"]})
        return {"val_acc": settings["lr"]}

    run_trial(copies, {"lr": 0.1, "unused": 1}, Reporter(), ["val_acc"])
    assert "never read" not in capsys.readouterr().err


def test_final_flag_is_set_under_train_only(tmp_path: Path) -> None:
    seen: list[Any] = []

    def objective(config: dict[str, Any], reporter: Reporter) -> dict[str, float]:
        seen.append(config.get("_final"))
        reporter.report(1, {"val_acc": 0.5})
        return {"val_acc": 0.5}

    run_trial(objective, {"lr": 0.1}, Reporter(), ["val_acc"])
    module = tmp_path / "mine.py"
    module.write_text(
        "def fit(config, reporter):\n"
        "    reporter.report(1, {'val_acc': 0.75 if config.get('_final') else 0.25})\n"
        "    return {'val_acc': 0.75 if config.get('_final') else 0.25}\n"
    )
    result = train({"objective": f"{module}:fit", "metric": ["val_acc"], "config": {"lr": 0.1}}, tmp_path / "final", quiet=True)
    assert seen == [None] and result.metrics["val_acc"] == 0.75


def test_hpsearch_run_from_python(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"study: api\nobjective: '{TOY}:objective'\nbudget: {{trials: 5}}\nfixed: {{epochs: 2}}\nspace:\n  lr: {{float: [0.001, 0.1], log: true}}\n"
    )
    summary = hpsearch.run(spec, budget__trials=2, output=str(tmp_path / "runs"))
    assert summary.finished == 2 and summary.failed == 0
    assert (tmp_path / "runs" / "api" / "study.db").exists()


def _idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    path.write_bytes(
        gzip.compress(header + array.astype(np.uint8).tobytes()) if path.suffix == ".gz" else header + array.astype(np.uint8).tobytes()
    )


def test_data_loaders_read_idx_files_once_per_process(tmp_path: Path) -> None:
    folder = tmp_path / "mnist"
    folder.mkdir()
    images = np.arange(20 * 28 * 28).reshape(20, 28, 28) % 256
    labels = np.array([0] * 10 + [1] * 6 + [2] * 4)
    for stem, array in (("train-images-idx3-ubyte", images), ("train-labels-idx1-ubyte", labels)):
        _idx(folder / f"{stem}.gz", array)
    for stem, array in (("t10k-images-idx3-ubyte", images[:5]), ("t10k-labels-idx1-ubyte", labels[:5])):
        _idx(folder / stem, array)
    train_x, train_y, test_x, test_y = data.load_mnist(tmp_path)
    assert train_x.shape == (20, 28, 28) and train_x.dtype == np.uint8 and (train_x == images).all()
    assert train_y.dtype == np.int64 and list(train_y) == list(labels) and test_x.shape == (5, 28, 28)
    assert data.load_mnist(tmp_path)[0] is train_x  # cached: the next trial in this process reads nothing
    assert not train_x.flags.writeable
    keep = data.stratified_subset(train_y, 10, seed=0)
    assert np.bincount(train_y[keep]).tolist() == [5, 3, 2]  # each class in proportion
    assert set(data.stratified_subset(train_y, 5, seed=0)) <= set(keep)
    assert (data.read_idx(folder / "t10k-labels-idx1-ubyte") == labels[:5]).all()
    (tmp_path / "junk").write_bytes(b"hello world")
    with pytest.raises(ValueError, match="junk: not an IDX file"):
        data.read_idx(tmp_path / "junk")
    with pytest.raises(FileNotFoundError, match="no folder holds all of"):
        data.load_mnist(tmp_path / "empty")


def test_import_hpsearch_and_report_need_no_torch_or_optuna() -> None:
    code = (
        "import sys, hpsearch, hpsearch.data; hpsearch.report(2, val_acc=0.5);"
        "assert not {'torch', 'optuna', 'pandas'} & set(sys.modules), sorted({'torch', 'optuna', 'pandas'} & set(sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"epoch": 2, "val_acc": 0.5}\n'


def test_hpsearch_report_stays_the_function_after_the_plots_package_loads():
    """A subpackage named like a top-level function replaces it once imported (hpsearch.report
    was the report package): the plots live in hpsearch.plots."""
    import hpsearch
    import hpsearch.plots  # noqa: F401

    assert callable(hpsearch.report) and hpsearch.report.__module__ == "hpsearch"
