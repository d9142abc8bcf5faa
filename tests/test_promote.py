"""promote: K configs x S seeds, mean ± std per config, the best mean exported (not the lucky winner)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml

from hpsearch.cli import main
from hpsearch.reruns.promote import Candidate, pick

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


def promote_rows(out: str) -> list[str]:
    """The promote table's rows (plain text when stdout is not a terminal): the lines after its title."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "(* = promoted)" in line)
    return [line for line in lines[start + 2 :] if line.strip() and not line.startswith(("promoted", "train it"))]


@pytest.mark.slow
def test_promote_with_two_workers_gives_the_same_table_and_winner(write_spec, tmp_path, capsys):
    rows, winners = [], []
    for workers, output in (("1", "runs1"), ("2", "runs2")):
        spec = write_spec(SPEC.replace("output: {out}", f"output: {tmp_path / output}"), name=f"{output}.yaml")
        assert main(["run", str(spec), "--quiet"]) == 0
        capsys.readouterr()
        assert main(["promote", str(spec), "--top", "2", "--seeds", "3", "--workers", workers, "--quiet"]) == 0
        rows.append(promote_rows(capsys.readouterr().out))
        winners.append(yaml.safe_load((tmp_path / output / "lucky" / "promoted.yaml").read_text())["provenance"])
    assert rows[0] == rows[1] and len(rows[0]) == 2
    assert winners[0]["trial"] == winners[1]["trial"] == 1
    assert winners[0]["promotion"]["candidates"] == winners[1]["promotion"]["candidates"]


def test_a_worker_joins_a_promote_study_and_runs_only_its_queued_runs(lucky, tmp_path, capsys):
    from tests.conftest import cli

    storage = f"sqlite:///{tmp_path / 'runs' / 'lucky' / 'study.db'}"
    assert main(["promote", str(lucky), "--top", "2", "--seeds", "3", "--queue-only"]) == 0
    out = capsys.readouterr().out
    assert f"hpsearch worker {lucky} --study lucky-promote --storage {storage}" in out
    # The spec's budget (3 trials) and pruner (none here) are not the promote study's: the worker runs its 6 queued runs.
    done = cli("worker", str(lucky), "--study", "lucky-promote", "--storage", storage, "--quiet")
    assert done.returncode == 0, done.stderr
    assert "6 finished (0 pruned), 0 failed; this worker ran 6" in done.stdout
    runs = optuna.load_study(study_name="lucky-promote", storage=storage).get_trials()
    assert len(runs) == 6 and all(t.state.name == "COMPLETE" for t in runs)  # no sampled trial beside the queued ones
    assert sorted((t.user_attrs["source_trial"], t.user_attrs["seed"]) for t in runs) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]

    assert main(["promote", str(lucky), "--top", "2", "--seeds", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("(from an earlier promote run)") == 6 and "promoted trial 1: val_acc 0.7 ± 0 over 3 seeds" in out


def test_failed_reruns_show_their_reason_and_the_next_promote_runs_only_what_it_asks_for(write_spec, tmp_path, capsys):
    spec = write_spec(
        """
        study: toy
        objective: {toy}:objective
        output: {out}
        budget: {{trials: 2}}
        pruner: none
        sampler: {{name: random, seed: 1}}
        fixed: {{epochs: 2}}
        space:
          lr: {{float: [0.001, 0.1], log: true}}
        """
    )
    assert main(["run", str(spec), "--quiet"]) == 0
    assert main(["promote", str(spec), "--top", "1", "--seeds", "2", "--set", "fail_at=1", "--quiet"]) == 2  # every re-run failed
    assert "trial 0 seed 0: failed: RuntimeError: boom at epoch 1" in capsys.readouterr().out
    assert main(["promote", str(spec), "--top", "1", "--seeds", "1", "--quiet"]) == 0
    storage = f"sqlite:///{tmp_path / 'runs' / 'toy' / 'study.db'}"
    states = [t.state.name for t in optuna.load_study(study_name="toy-promote", storage=storage).get_trials()]
    assert states == ["FAIL", "FAIL", "COMPLETE"]  # the config without fail_at ran once; nothing else was queued
