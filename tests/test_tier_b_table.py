"""bench.tier_b_table: the Tier B table generator (Sobol configs of the bench Fashion-MNIST space,
trained with the built-in objective, one row per (config, seed)).

The table it wrote on a borrowed machine is bench/results/tier_b/table.jsonl.gz; these tests check
what a rerun depends on: the configs land in the space, a run cut short keeps whole seed pairs, the
rows hold every epoch, and the script runs where optuna, pydantic and ray are not installed.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FASHION = Path("/usr/share/datasets/fashion-mnist")  # Debian's dataset-fashion-mnist
needs_fashion = pytest.mark.skipif(not (FASHION / "train-images-idx3-ubyte.gz").is_file(), reason="dataset-fashion-mnist not installed")

# Makes `import optuna|pydantic|ray` fail, as on the borrowed machine that runs the generator.
BLOCK = """
import importlib.abc, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("optuna", "pydantic", "ray"):
            raise ImportError(f"{name} is not installed here")
        return None
sys.meta_path.insert(0, _Block())
"""


@pytest.fixture(scope="module")
def tb() -> ModuleType:
    from bench import tier_b_table

    return tier_b_table


def test_sobol_configs_land_in_the_space_and_repeat(tb: ModuleType) -> None:
    _, space = tb.load_spec(tb.SPEC)
    configs = tb.draw(space, 16, scramble_seed=0)
    assert configs == tb.draw(space, 16, scramble_seed=0)  # the table can be regenerated
    assert configs != tb.draw(space, 16, scramble_seed=1)  # held-out configs are other points
    assert {c["optimizer"] for c in configs} == {"sgd", "adamw"}
    for c in configs:
        assert c["batch_size"] in (32, 64, 128, 256)
        assert 1e-6 <= c["weight_decay"] <= 1e-2 and 0.0 <= c["warmup_epochs"] <= 1.0
        if c["optimizer"] == "sgd":
            assert 0.003 <= c["lr"] <= 0.5 and 0.5 <= c["momentum"] <= 0.99 and "beta2" not in c
        else:
            assert 1e-4 <= c["lr"] <= 1e-2 and 0.9 <= c["beta2"] <= 0.999 and "momentum" not in c


def test_a_run_cut_short_keeps_both_seeds_and_some_held_out(tb: ModuleType) -> None:
    configs = [{"i": i} for i in range(20)]
    held_out = [{"h": j} for j in range(5)]
    jobs = tb.jobs_for(configs, held_out, {})
    assert len(jobs) == 2 * (20 + 5)
    # jobs start in this order, so any even-length prefix is whole (config, seed 0/1) pairs
    for a, b in zip(jobs[::2], jobs[1::2], strict=True):
        assert (a["id"], a["seed"], b["id"], b["seed"]) == (a["id"], 0, a["id"], 1)
    assert [j["id"] for j in jobs[:4:2]] == ["h0", "t0"]  # held-out configs come early, one per 8
    # pairs h0, t0..t7, h1, t8..t15, h2: the held-out set is spread through the run
    assert [j["id"] for j in jobs[: 2 * 19 : 2] if j["set"] == "holdout"] == ["h0", "h1", "h2"]
    assert [j["id"] for j in jobs[-4::2]] == ["h3", "h4"]  # the rest after the table configs


@needs_fashion
def test_rows_hold_every_epoch_of_two_configs(tb: ModuleType) -> None:
    fixed, space = tb.load_spec(tb.SPEC)
    fixed.update(epochs=1, train_subset=500, val_subset=200, data_root=str(FASHION.parent), threads=1)
    rows = [tb.run_job({"id": f"t{i}", "set": "table", "config": c, "seed": 0, "fixed": fixed}) for i, c in enumerate(tb.draw(space, 2, 0))]
    for row in rows:
        assert "error" not in row
        assert len(row["val_acc"]) == len(row["epoch_s"]) == len(row["train_loss"]) == 1
        assert 0.15 < row["val_acc"][0] <= 1.0  # 10 classes: chance is 0.1
        assert math.isfinite(row["train_loss"][0]) and row["epoch_s"][0] > 0
        assert row["final"]["val_acc"] == row["val_acc"][-1]
    assert rows[0]["config"] != rows[1]["config"]


def _run_script(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`python -m bench.tier_b_table ARGS` with the checkout importable but run from tmp_path."""
    code = BLOCK + "import runpy; runpy.run_module('bench.tier_b_table', run_name='__main__', alter_sys=True)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@needs_fashion
def test_smoke_run_without_optuna_pydantic_ray_writes_table_and_meta(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _run_script(["--smoke", "--data-root", str(FASHION.parent), "--out", str(out), "--jobs", "2"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    rows: list[dict[str, Any]] = [json.loads(line) for line in gzip.open(out / "table.jsonl.gz", "rt")]
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["n"], meta["m"], meta["seeds"], meta["rows"], meta["failed"]) == (3, 1, [0, 1], 8, 0)
    assert sorted((r["id"], r["seed"]) for r in rows) == sorted((i, s) for i in ("h0", "t0", "t1", "t2") for s in (0, 1))
    assert all(len(r["val_acc"]) == 2 and "error" not in r for r in rows)  # --smoke trains 2 epochs
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "table.jsonl.gz"]


@pytest.mark.slow
def test_time_limit_starts_nothing_after_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _run_script(["--smoke", "--out", str(out), "--jobs", "1", "--limit-s", "0"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["rows"], meta["rows_planned"]) == (0, 8)
    assert gzip.open(out / "table.jsonl.gz", "rt").read() == ""
