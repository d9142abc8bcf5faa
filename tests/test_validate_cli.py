"""``hpsearch validate``: the objective's own validate hook runs on sampled configs, so a space whose
configs would mostly be rejected at run time is not called simply "valid"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli

SPACES = sorted((ROOT / "spaces").glob("*.yaml"))  # quickstart, resnet, and fashion once it ships

PICKY = """
def fit(config, reporter):
    return {"score": 1.0}


def validate(config):
    # the low end of the range (what the spec check tries) passes; every random draw is above it
    return [f"x must be 0, got x={config['x']}"] if config["x"] > 0 else []


fit.validate = validate
"""


@pytest.mark.parametrize("path", SPACES, ids=[p.name for p in SPACES])
def test_no_shipped_spec_draws_configs_its_objective_rejects(path: Path):
    result = cli("validate", str(path.relative_to(ROOT)), "--samples", "40")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{path.relative_to(ROOT)}: valid"
    assert "checked 40 sampled configs with the objective's validate hook: none rejected" in result.stdout


def test_warmup_as_long_as_the_run_is_counted_and_explained():
    """The issue's case: one epoch, warmup drawn from [0, 5] epochs."""
    result = cli("validate", "spaces/resnet.yaml", "--set", "fixed.epochs=1", "--samples", "10")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    match = re.fullmatch(r"spaces/resnet.yaml: valid, but (\d+) of 10 sampled configs would be rejected by the objective", first)
    assert match, first
    rejected = int(match.group(1))
    assert 1 <= rejected < 10
    grouped = [line for line in result.stdout.splitlines() if "warmup_epochs must be < epochs" in line]
    assert len(grouped) == 1, result.stdout  # one line for the reason, not one per config
    assert grouped[0].strip().startswith(f"{rejected} of 10: ")
    assert f"and {rejected - 1} more like it" in grouped[0] or rejected == 1


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
        "error: picky.yaml: all 20 sampled configs would be rejected by objective picky.py:fit: 20 of 20: x must be 0"
    )
    assert result.stdout == ""
    assert not (tmp_path / "runs").exists()
