"""promote: K configs x S seeds, mean ± std per config, the best mean exported (not the lucky winner)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml

from hpsearch.cli import main
from hpsearch.results import Candidate, pick

SEEDED = Path(__file__).resolve().parent / "fixtures" / "seeded.py"

# Trial 0 is the lucky winner at seed 0 (0.5 + 0.3 = 0.8, but 0.2 at other seeds);
# trial 1 is steady at 0.7; trial 2 steady at 0.6 and outside --top 2.
SPEC = f"""
study: lucky
objective: {SEEDED}:objective
output: {{out}}
budget: {{{{trials: 3}}}}
pruner: none
sampler: random
fixed: {{{{seed: 0, epochs: 2}}}}
space:
  quality: {{{{choice: [0.5, 0.6, 0.7]}}}}
  luck: {{{{choice: [0.0, 0.3]}}}}
warm_start:
  - {{{{quality: 0.5, luck: 0.3}}}}
  - {{{{quality: 0.7, luck: 0.0}}}}
  - {{{{quality: 0.6, luck: 0.0}}}}
"""


@pytest.fixture
def lucky(write_spec, capsys) -> Path:
    spec = write_spec(SPEC)
    assert main(["run", str(spec), "--quiet"]) == 0
    capsys.readouterr()
    return spec


def test_promote_picks_the_best_mean_not_the_lucky_winner(lucky, tmp_path, capsys):
    assert main(["promote", str(lucky), "--top", "2", "--seeds", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    storage = f"sqlite:///{tmp_path / 'runs' / 'lucky' / 'study.db'}"
    runs = optuna.load_study(study_name="lucky-promote", storage=storage).get_trials()
    assert len(runs) == 2 * 3
    assert sorted((t.user_attrs["source_trial"], t.user_attrs["seed"]) for t in runs) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert sorted(round(t.value, 6) for t in runs if t.user_attrs["source_trial"] == 0) == [0.2, 0.2, 0.8]

    promoted = tmp_path / "runs" / "lucky" / "promoted.yaml"
    doc = yaml.safe_load(promoted.read_text())
    assert doc["provenance"]["trial"] == 1 and doc["config"]["quality"] == 0.7
    promotion = doc["provenance"]["promotion"]
    assert promotion["mean"] == pytest.approx(0.7) and promotion["std"] == pytest.approx(0.0) and promotion["seeds"] == [0, 1, 2]
    assert {c["trial"]: round(c["mean"], 6) for c in promotion["candidates"]} == {0: 0.4, 1: 0.7}
    assert "promoted trial 1: val_acc 0.7 ± 0 over 3 seeds" in out
    table = next(line for line in out.splitlines() if line.lstrip().startswith("0 "))
    assert "0.8" in table and "0.4" in table and "0.3464" in table  # search value, mean, sample std of 0.8 0.2 0.2


def test_promote_again_reuses_finished_runs(lucky, tmp_path, capsys):
    assert main(["promote", str(lucky), "--top", "2", "--seeds", "2", "--quiet", "-o", str(tmp_path / "p.yaml")]) == 0
    assert main(["promote", str(lucky), "--top", "2", "--seeds", "3", "--quiet", "-o", str(tmp_path / "p.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.count("(from an earlier promote run)") == 4  # seeds 0 and 1 of both configs
    storage = f"sqlite:///{tmp_path / 'runs' / 'lucky' / 'study.db'}"
    assert len(optuna.load_study(study_name="lucky-promote", storage=storage).get_trials()) == 6
    assert yaml.safe_load((tmp_path / "p.yaml").read_text())["provenance"]["trial"] == 1


def test_equal_means_go_to_the_lower_spread():
    steady, noisy = Candidate(None, {}, values=[0.7, 0.7]), Candidate(None, {}, values=[0.6, 0.8])  # type: ignore[arg-type]
    assert pick([noisy, steady], "maximize") is steady
    assert pick([noisy, steady], "minimize") is steady


def test_the_promoted_config_trains_after_best_yaml_of_the_same_trial(lucky, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(lucky), "-o", "best.yaml", "--trial", "1"]) == 0
    assert main(["train", "best.yaml", "--quiet"]) == 0
    assert main(["promote", str(lucky), "--top", "2", "--seeds", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    promoted = tmp_path / "runs" / "lucky" / "promoted.yaml"
    assert f"train it: hpsearch train {promoted}" in out
    assert main(["train", str(promoted), "--quiet"]) == 0  # printed as the next step: it must work
    runs = tmp_path / "runs" / "train"
    assert (runs / "lucky-trial1" / "metrics.json").exists() and (runs / "lucky-trial1-promoted" / "metrics.json").exists()
