"""bench.fashion_seeds: the final run's goal is judged on the mean over training seeds, read
from the folders `hpsearch train` writes."""

from __future__ import annotations

import json

import pytest
import yaml

from bench import fashion_seeds


def _run(folder, seed, test_acc, lr=0.1):
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"config": {"seed": seed, "lr": lr}}))
    (folder / "metrics.json").write_text(json.dumps({"val_acc": 0.93, "test_acc": test_acc}))
    return folder


def test_the_goal_is_judged_on_the_mean_of_the_seeds(tmp_path, capsys):
    runs = [_run(tmp_path / f"s{s}", s, acc) for s, acc in [(0, 0.9311), (1, 0.9293), (2, 0.9286)]]
    out = tmp_path / "seeds.json"
    fashion_seeds.main([*map(str, runs), "--json", str(out)])
    result = json.loads(out.read_text())
    assert [r["seed"] for r in result["runs"]] == [0, 1, 2]
    assert result["mean_test_acc"] == pytest.approx(0.92967, abs=1e-5) and result["goal_met"] is False
    assert "not met" in capsys.readouterr().out


def test_runs_of_different_configs_are_refused(tmp_path):
    runs = [_run(tmp_path / "a", 0, 0.94), _run(tmp_path / "b", 1, 0.94, lr=0.2)]
    with pytest.raises(SystemExit, match="differ in more than the seed"):
        fashion_seeds.main([str(r) for r in runs])
