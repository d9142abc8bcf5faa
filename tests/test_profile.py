"""hpsearch profile: the trace, the phase table, the config it chose, --compare and its bad input.

Digits with an mlp (or a width-4 cnn), one thread, 2-3 steps: the profiler's own start-up
costs more than the steps. Nothing here asserts on a speed, only that each number is there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml

from hpsearch.cli import main

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = f"{ROOT / 'objectives' / 'image_classification.py'}:train"
CONFIG = {"dataset": "digits", "model": "mlp", "epochs": 2, "batch_size": 32, "seed": 0, "threads": 1}

SPEC = """
study: prof
objective: hpsearch.objectives.image_classification:train
output: {out}
budget: {{trials: 2}}
pruner: none
sampler: {{name: random, seed: 0}}
fixed: {{dataset: digits, model: mlp, epochs: 1, batch_size: 32, seed: 0, threads: 1}}
space:
  lr: {{float: [0.01, 1.0], log: true}}
  optimizer: {{choice: [sgd, adam]}}
"""


@pytest.fixture(autouse=True)
def _threads():
    threads = torch.get_num_threads()  # the objective's threads: 1 is process-wide; give it back after
    yield
    torch.set_num_threads(threads)


def write_config(path: Path, **changes) -> Path:
    doc = {"objective": BUILTIN, "metric": "val_acc", "output": str(path.parent / "runs"), "config": {**CONFIG, **changes}}
    path.write_text(yaml.safe_dump(doc))
    return path


def test_profile_writes_a_trace_and_a_phase_table(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml", model="cnn", width=4)
    assert main(["profile", str(config), "--steps", "3", "-o", str(tmp_path / "trace")]) == 0
    out = capsys.readouterr().out

    traces = list((tmp_path / "trace").glob("*.pt.trace.json"))
    assert len(traces) == 1 and f"trace: {traces[0]}" in out
    events = json.loads(traces[0].read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert {"hpsearch/data", "hpsearch/forward", "hpsearch/backward", "hpsearch/optimizer"} <= names
    assert any(str(n).startswith("aten::") for n in names)

    shares = {m[1]: float(m[2]) for m in re.finditer(r"^(data|forward|backward|optimizer) +[\d.]+ +([\d.]+)%$", out, re.M)}
    assert set(shares) == {"data", "forward", "backward", "optimizer"}, out
    assert sum(shares.values()) == pytest.approx(100.0, abs=0.3)
    assert "aten::" in out.split("top operators", 1)[1]  # the operator table
    assert re.search(r"peak memory: [\d,]+ MiB", out)


def test_a_spec_without_a_study_is_profiled_at_its_middle_values(write_spec, tmp_path, capsys):
    spec = write_spec(SPEC)
    assert main(["profile", str(spec), "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "the spec's fixed values and its space's middle, as lr-find takes it" in out
    assert "has not been run" in out and "lr: 0.1," in out and "optimizer: sgd" in out  # sqrt(0.01 * 1.0)
    assert list((tmp_path / "runs" / "prof" / "profile").glob("*.pt.trace.json"))


def test_a_spec_is_profiled_at_its_best_trial_or_the_one_asked_for(write_spec, capsys):
    spec = write_spec(SPEC)
    assert main(["run", str(spec), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["best", str(spec), "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"][0]
    assert main(["profile", str(spec), "--steps", "2", "--compare", "amp=off"]) == 0
    assert f"profiling the best trial {best['number']} of study 'prof' (val_acc=" in capsys.readouterr().out
    other = 1 - best["number"]
    assert main(["profile", str(spec), "--trial", str(other), "--steps", "2", "--compare", "amp=off"]) == 0
    assert f"profiling trial {other} of study 'prof'" in capsys.readouterr().out


def test_compare_prints_samples_per_second_for_each_variant(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml")
    assert main(["profile", str(config), "--steps", "2", "--compare", "amp=off,bf16", "batch_size=16,32"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "samples/s" in line]
    labels = [line.split("  ")[0].strip() for line in lines]
    assert labels == ["amp=off batch_size=16", "amp=off batch_size=32", "amp=bf16 batch_size=16", "amp=bf16 batch_size=32"]
    assert all(float(re.search(r"([\d,]+) samples/s", line)[1].replace(",", "")) > 0 for line in lines)


@pytest.mark.parametrize(
    ("compare", "message"),
    [
        (["amp"], "--compare 'amp': expected KEY=VALUE1,VALUE2,..."),
        (["amp=off,"], "--compare 'amp=off,': expected KEY=VALUE1,VALUE2,..."),
        (["=off"], "--compare '=off': expected KEY=VALUE1,VALUE2,..."),
        (["amp=off", "amp=bf16"], "--compare amp: given twice"),
        (["amp=off,fp8"], "--compare amp=fp8: config: unknown amp value 'fp8'"),
        (["batchsize=16"], "--compare batchsize=16: config: unknown config key 'batchsize'"),
    ],
)
def test_bad_compare_text_is_one_line_and_exit_2(tmp_path, capsys, compare, message):
    config = write_config(tmp_path / "c.yaml")
    assert main(["profile", str(config), "--compare", *compare]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()


def test_an_objective_without_a_build_hook_is_one_line(write_spec, capsys):
    spec = write_spec("study: toy\nobjective: {toy}:objective\noutput: {out}\nspace: {{lr: {{float: [0.01, 0.1]}}}}\n")
    assert main(["profile", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "has no build hook" in err and len(err.strip().splitlines()) == 1, err


def test_trial_with_an_exported_config_is_one_line(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml")
    assert main(["profile", str(config), "--trial", "2"]) == 2
    err = capsys.readouterr().err
    assert "--trial picks a trial of a spec's study; this is an exported config" in err and len(err.strip().splitlines()) == 1
