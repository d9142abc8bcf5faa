"""hpsearch audit: the median pruner kills a late bloomer; the audit re-runs it and finds the false prune."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from hpsearch.cli import main
from hpsearch.reruns.audit import wilson

LATE = Path(__file__).resolve().parent / "fixtures" / "late.py"

# Trials 0 and 1 complete (the pruner's start-up); trial 2 is a late bloomer (0.1 until its last
# epoch, then 0.95: the best of all), pruned at epoch 1; trials 3 and 4 are pruned at epoch 1 too,
# and would have ended below the best (0.75, trial 0).
SPEC = f"""
study: late
objective: {LATE}:objective
output: {{out}}
budget: {{{{trials: 5}}}}
sampler: random
pruner: {{{{name: median, startup_trials: 2, warmup_epochs: 0, trust: null}}}}  # the median alone: no trust gate
fixed: {{{{epochs: 4}}}}
space:
  quality: {{{{choice: [0.5, 0.6, 0.7, 0.8, 0.95]}}}}
  late: {{{{choice: [false, true]}}}}
warm_start:
  - {{{{quality: 0.8, late: false}}}}
  - {{{{quality: 0.7, late: false}}}}
  - {{{{quality: 0.95, late: true}}}}
  - {{{{quality: 0.5, late: false}}}}
  - {{{{quality: 0.6, late: false}}}}
"""


@pytest.fixture
def late(write_spec, capsys) -> Path:
    spec = write_spec(SPEC)
    assert main(["run", str(spec), "--quiet"]) == 0
    capsys.readouterr()
    return spec


def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs' / 'late' / 'study.db'}"


@pytest.mark.slow
def test_audit_finds_the_pruned_winner_and_reuses_its_reruns(late, tmp_path, capsys):
    assert main(["audit", str(late), "--quiet"]) == 0
    out = capsys.readouterr().out
    low, high = wilson(1, 3)
    assert "1 of 3 audited pruned trials would have beaten or tied the best val_acc=0.75 (trial 0" in out
    assert f"95% CI {low:.2f}-{high:.2f} (Wilson)" in out and "0.06-0.79" in out
    assert "pruning saved 9 of 20 epochs (45%)" in out  # 3 pruned trials ran 1 of their 4 epochs each
    row = next(line for line in out.splitlines() if line.split()[:1] == ["2"])
    assert "0.95" in row and row.rstrip().endswith("beats")

    runs = optuna.load_study(study_name="late-audit", storage=storage(tmp_path)).get_trials()
    assert sorted(t.user_attrs["source_trial"] for t in runs) == [2, 3, 4]
    assert all(t.state.name == "COMPLETE" and len(t.intermediate_values) == 4 for t in runs)  # pruner off: every epoch

    assert main(["audit", str(late), "--quiet"]) == 0
    again = capsys.readouterr().out
    assert "3 of 3 re-runs finished in an earlier audit: reused" in again and "1 of 3 audited pruned trials" in again
    assert len(optuna.load_study(study_name="late-audit", storage=storage(tmp_path)).get_trials()) == 3  # no new trials

    assert main(["report", str(late)]) == 0
    index = (tmp_path / "runs" / "late" / "report" / "index.html").read_text()
    assert "Pruning audit" in index and "false-prune rate" in index and "audit.png" in index
    assert (tmp_path / "runs" / "late" / "report" / "audit.png").stat().st_size > 0


@pytest.mark.slow
def test_audit_takes_the_pruned_trials_that_ranked_best_when_pruned(late, tmp_path, capsys):
    assert main(["audit", str(late), "--pruned", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    runs = optuna.load_study(study_name="late-audit", storage=storage(tmp_path)).get_trials()
    assert [t.user_attrs["source_trial"] for t in runs] == [4]  # 0.3 at epoch 1, ahead of trial 3 (0.25) and 2 (0.1)
    assert "0 of 1 audited pruned trials" in out


@pytest.mark.slow
def test_a_study_without_pruned_trials_has_nothing_to_audit(write_spec, capsys):
    spec = write_spec(SPEC.replace("name: median, startup_trials: 2, warmup_epochs: 0", "name: none"))
    assert main(["run", str(spec), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["audit", str(spec)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["late: no pruned trials to audit (5 trials); nothing to re-run"]


def test_wilson_interval_matches_the_textbook_values():
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)
