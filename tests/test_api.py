"""The Python entry for notebooks: hpsearch.load(spec) -> (study, DataFrame)."""

from __future__ import annotations

import pytest

import hpsearch
from tests.conftest import cli


@pytest.mark.slow
def test_load_gives_the_study_and_one_row_per_trial_with_values_params_and_config(write_spec, tmp_path):
    spec = write_spec(
        """
        study: nb
        objective: "{toy}:objective"
        output: {out}
        budget: {{trials: 4}}
        sampler: {{name: random, seed: 0}}
        pruner: none
        fixed: {{epochs: 2}}
        space:
          lr: {{float: [1.0e-4, 1.0], log: true}}
          optimizer:
            choice:
              sgd: {{momentum: {{float: [0.5, 0.99]}}}}
              adamw: null
        """
    )
    assert cli("run", str(spec), "--quiet").returncode == 0
    study, df = hpsearch.load(str(spec))
    assert study.study_name == "nb" and len(df) == 4
    assert {"number", "state", "val_acc", "value", "params_lr", "params_optimizer", "reason", "epochs", "config_lr"} <= set(df.columns)
    assert (df["state"] == "COMPLETE").all() and (df["val_acc"] == df["value"]).all()
    assert df.loc[df["value"].idxmax(), "number"] == study.best_trial.number
    sgd = df[df["params_optimizer"] == "sgd"]
    assert sgd["params_optimizer.sgd.momentum"].notna().all() and (sgd["config_momentum"] == sgd["params_optimizer.sgd.momentum"]).all()


def test_the_package_has_a_version():
    assert hpsearch.__version__ and hpsearch.__version__ != "0+unknown"
