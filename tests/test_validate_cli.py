"""``hpsearch validate``: the objective's own validate hook runs on sampled configs, so a space whose
configs would mostly be rejected at run time is not called simply "valid"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, cli

SPACES = sorted((ROOT / "spaces").glob("*.yaml"))  # quickstart, resnet, and fashion once it ships

PICKY = """
def fit(config, reporter):
    return {"score": 1.0}


def validate(config):
    # both ends of the range (what the spec check tries) pass; every random draw is between them
    return [f"x must be 0 or 1, got x={config['x']}"] if 0 < config["x"] < 1 else []


fit.validate = validate
"""


@pytest.mark.slow
@pytest.mark.parametrize("path", SPACES, ids=[p.name for p in SPACES])
def test_no_shipped_spec_draws_configs_its_objective_rejects(path: Path):
    result = cli("validate", str(path.relative_to(ROOT)), "--samples", "40")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{path.relative_to(ROOT)}: valid"
    assert "checked 40 sampled configs with the objective's validate hook: none rejected" in result.stdout


@pytest.mark.slow
def test_a_range_the_fixed_values_cannot_fit_fails_at_validate_naming_both_keys(tmp_path: Path):
    """The issue's case: one epoch, warmup drawn from [0, 5] epochs: one line before trial 0, not failed trials."""
    result = cli("validate", str(ROOT / "spaces" / "resnet.yaml"), "--set", "fixed.epochs=1", "--output", str(tmp_path / "runs"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "space.warmup_epochs: its high end" in lines[0] and "fixed.epochs" in lines[0] and "warmup_epochs must be < epochs" in lines[0]
    assert not (tmp_path / "runs").exists()
    run = cli("run", str(ROOT / "spaces" / "quickstart.yaml"), "--set", "fixed.epochs=1", "--output", str(tmp_path / "runs"))
    assert run.returncode == 2 and "space.warmup_epochs: its high end" in run.stderr
    assert not (tmp_path / "runs").exists()  # nothing written to the study


def test_a_space_whose_every_config_is_rejected_exits_2(tmp_path: Path):
    (tmp_path / "picky.py").write_text(PICKY)
    spec = tmp_path / "picky.yaml"
    spec.write_text("study: picky\nobjective: picky.py:fit\nmetric: score\noutput: runs\nspace:\n  x: {float: [0.0, 1.0]}\n")
    result = cli("validate", "picky.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one reason, grouped over the 20 configs
    assert lines[0].startswith(
        "error: picky.yaml: all 20 sampled configs would be rejected by objective picky.py:fit: 20 of 20: x must be 0 or 1"
    )
    assert result.stdout == ""
    assert not (tmp_path / "runs").exists()
