"""What the shipped spaces promise in their headers: the export line makes a valid config, and
the metric they search is one the objective returns."""

from __future__ import annotations

import itertools
import math
import re
import shlex
from pathlib import Path

import pytest
import torch
import yaml

from hpsearch.objectives.image_classification import train, validate
from hpsearch.parts.datasets import DATASETS
from hpsearch.spec.loader import load_spec
from tests.conftest import ROOT

SPACES = sorted([*(ROOT / "spaces").glob("*.yaml"), *(ROOT / "bench" / "spaces").glob("*.yaml")])  # what users run, then bench-only specs
BUILTIN = [p for p in SPACES if "hpsearch.objectives.image_classification:train" in p.read_text()]
EXPORTING = [p for p in BUILTIN if "hpsearch export" in p.read_text()]


def header_export_sets(path: Path) -> dict[str, object]:
    """`--set key=value` pairs of the `hpsearch export` line in the header comment."""
    header = [line.lstrip("# ") for line in path.read_text().splitlines() if line.startswith("#")]
    export = [line for line in header if line.startswith("hpsearch export")]
    if not export:
        return {}
    words = shlex.split(export[0].split("  #")[0])
    return {k: yaml.safe_load(v) for w, nxt in itertools.pairwise(words) if w == "--set" for k, v in [nxt.split("=", 1)]}


class _Reporter:
    trial_dir = None

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        pass


def _skip_without_files(config: dict) -> None:
    missing = DATASETS[config["dataset"]].missing({**config, "download": False})
    if missing:
        pytest.skip(f"dataset files absent (no downloads in tests): {missing}")


@pytest.mark.parametrize("path", EXPORTING, ids=[p.name for p in EXPORTING])
def test_the_header_export_line_gives_a_valid_final_config(path: Path) -> None:
    spec = load_spec(path, check_objective=False)  # no download pre-flight; validate() below checks the config
    overrides = header_export_sets(path)
    assert overrides, f"{path.name}: the export line has no --set"
    for sampled in spec.tree.representative_configs():
        config = {**spec.config_for(sampled), **overrides}
        _skip_without_files(config)
        assert validate(config) == [], (path.name, overrides)


@pytest.mark.slow
@pytest.mark.parametrize("path", BUILTIN, ids=[p.name for p in BUILTIN])
def test_the_searched_metric_comes_back_from_one_short_trial(path: Path) -> None:
    spec = load_spec(path, check_objective=False)  # no download pre-flight; validate() below checks the config
    config = {**spec.config_for(spec.tree.representative_configs()[0]), "epochs": 1, "download": False}
    _skip_without_files(config)
    if config["dataset"] not in ("digits", "synthetic"):  # a few hundred images keep it to seconds
        config.update(train_subset=512, val_subset=256, batch_size=64, accum_steps=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny runs; a second spinning thread only slows a shared machine
    try:
        result = train(config, _Reporter())
    finally:
        torch.set_num_threads(threads)
    assert all(math.isfinite(result[m]) for m in spec.metrics), (path.name, spec.metrics, result)


def test_the_quickstart_header_states_the_real_split() -> None:
    from hpsearch.parts.datasets import build_data

    spec = load_spec(ROOT / "spaces" / "quickstart.yaml")
    config = spec.config_for(spec.tree.representative_configs()[0])
    data = build_data(config, torch.device("cpu"))
    sizes = len(data.train.split), len(data.val.split), len(data.test.split)
    text = (ROOT / "spaces" / "quickstart.yaml").read_text()
    stated = re.search(r"(\d+) validation, ([\d,]+) train", text)
    assert stated and (int(stated[1]), int(stated[2].replace(",", ""))) == sizes[1::-1]
    assert f"({sizes[2]}) test" in text
