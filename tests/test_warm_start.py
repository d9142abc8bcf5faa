"""warm_start: {study, storage, top}: a new study learns from an earlier one, through the CLI."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from hpsearch.cli import main
from tests.conftest import TOY

# The earlier study: lr over [1e-4, 1], and a `width` the new space no longer has.
SOURCE = """
study: small
objective: {toy}:objective
output: {out}
budget: {{trials: 8}}
pruner: none
sampler: {{name: random, seed: 3}}
fixed: {{epochs: 2}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
  width: {{int: [1, 8]}}
"""

# The new study: lr narrowed to [1e-3, 1] (earlier trials below it do not fit), width gone, momentum new.
TARGET = """
study: full
objective: {toy}:objective
output: {out}
budget: {{trials: 3}}
pruner: none
sampler: {{name: tpe, seed: 0}}
fixed: {{epochs: 3}}
space:
  lr: {{float: [1.0e-3, 1.0], log: true}}
  momentum: {{float: [0.8, 0.99]}}
warm_start: {{study: small, top: 1}}
"""


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def trials(capsys, spec: Path) -> list[dict]:
    code, out, _ = run(capsys, "trials", str(spec), "--json")
    assert code == 0
    doc = json.loads(out)
    return doc["trials"] if isinstance(doc, dict) else doc


@pytest.fixture(scope="module")
def source_runs(tmp_path_factory) -> Path:
    """The earlier study, run once for the module (its runs/ folder is copied into each test's)."""
    folder = tmp_path_factory.mktemp("source")
    spec = folder / "small.yaml"
    spec.write_text(textwrap.dedent(SOURCE).format(out=folder / "runs", toy=TOY))
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(spec), "--quiet"]) == 0
    return folder / "runs"


@pytest.fixture
def source(source_runs, write_spec, capsys, tmp_path) -> tuple[Path, list[dict]]:
    shutil.copytree(source_runs, tmp_path / "runs")
    spec = write_spec(SOURCE, "small.yaml")
    return spec, trials(capsys, spec)


@pytest.mark.slow
def test_imports_fitting_trials_drops_removed_params_skips_out_of_range(source, write_spec, capsys):
    _, earlier = source
    fitting = [t for t in earlier if t["params"]["lr"] >= 1e-3]
    assert 0 < len(fitting) < len(earlier)  # the seed gives both kinds
    spec = write_spec(TARGET, "full.yaml")
    code, out, _ = run(capsys, "run", str(spec))
    assert code == 0
    assert (
        f"full: imported {len(fitting)} finished trials of study small (they inform the sampler, not the budget); "
        f"skipped {len(earlier) - len(fitting)} with a value outside this space; "
        "dropped parameters no longer searched: width; re-evaluating its best 1 first"
    ) in out
    assert f"full: 3 finished (0 pruned), 0 failed, {len(fitting)} imported; best" in out

    rows = trials(capsys, spec)
    imported = [t for t in rows if t["imported_from"]]
    own = [t for t in rows if not t["imported_from"]]
    assert sorted(t["imported_from"]["trial"] for t in imported) == sorted(t["number"] for t in fitting)
    assert {t["imported_from"]["study"] for t in imported} == {"small"}
    by_number = {t["number"]: t for t in fitting}
    for t in imported:  # the earlier values, width dropped, momentum left to the sampler
        was = by_number[t["imported_from"]["trial"]]
        assert t["values"] == was["values"] and t["params"] == {"lr": was["params"]["lr"]}
        assert t["reason"] == f"imported from small trial {was['number']}"
    # the budget counts this study's own trials only: exactly 3 ran here
    assert len(own) == 3 and all(t["state"] == "COMPLETE" and t["epochs"] == 3 for t in own)
    # top 1: the earlier best fitting config is re-evaluated first, in this setting, with a sampled momentum
    best_earlier = max(fitting, key=lambda t: t["values"]["val_acc"])
    first = min(own, key=lambda t: t["number"])
    assert first["params"]["lr"] == best_earlier["params"]["lr"] and 0.8 <= first["params"]["momentum"] <= 0.99
    assert first["values"]["val_acc"] > best_earlier["values"]["val_acc"]  # 3 epochs here, 2 there

    # best is this study's own (an imported 2-epoch value is not a result of this setting)
    code, out, _ = run(capsys, "best", str(spec), "--json")
    [best] = json.loads(out)["best"]
    assert best["imported_from"] is None and best["number"] in {t["number"] for t in own}
    assert best["values"]["val_acc"] == max(t["values"]["val_acc"] for t in own)
    # status counts and ranks this study's own trials too
    code, out, _ = run(capsys, "status", str(spec), "--json")
    shown = json.loads(out)
    assert code == 0 and shown["budget"]["done"] == 3 and shown["best"]["number"] == best["number"]

    # a resume imports nothing again and runs nothing past the budget
    code, out, _ = run(capsys, "run", str(spec))
    assert code == 0 and "imported" not in out.splitlines()[0] and "budget reached (3/3 trials finished)" in out
    assert len(trials(capsys, spec)) == len(rows)


def test_top_k_configs_run_first_and_count_toward_the_budget(source, write_spec, capsys):
    _, earlier = source
    spec = write_spec(
        TARGET.replace("lr: {{float: [1.0e-3, 1.0], log: true}}", "lr: {{float: [1.0e-4, 1.0], log: true}}")
        .replace("top: 1", "top: 2")
        .replace("trials: 3", "trials: 2"),
        "top.yaml",
    )
    assert main(["run", str(spec), "--quiet"]) == 0
    capsys.readouterr()
    rows = trials(capsys, spec)
    own = sorted((t for t in rows if not t["imported_from"]), key=lambda t: t["number"])
    assert len([t for t in rows if t["imported_from"]]) == len(earlier)  # all fit: nothing skipped
    top2 = sorted(earlier, key=lambda t: -t["values"]["val_acc"])[:2]
    assert [t["params"]["lr"] for t in own] == [t["params"]["lr"] for t in top2]  # the whole budget: the two re-evaluations


@pytest.mark.parametrize(
    ("warm_start", "message"),
    [
        ("{{study: nowhere}}", "warm_start.study: no study database at"),
        ("{{study: nowhere, storage: sqlite:///runs/small/study.db}}", "warm_start.study: no study named 'nowhere' in sqlite:///"),
        ("{{study: small, storage: sqlite:///missing/db.sqlite}}", "warm_start.storage: no study database at"),
        ("{{studdy: small}}", "warm_start.studdy: unknown key; did you mean 'study'?"),
        ("{{top: 2}}", "warm_start.top: re-evaluates the best 2 trials of an earlier study: name it in warm_start.study"),
        ("{{study: small, top: -1}}", "warm_start.top: Input should be greater than or equal to 0"),
        ("{{study: small, until: 0}}", "warm_start.until: Input should be greater than or equal to 1"),
        ("{{study: full}}", "warm_start.study: 'full' is this study itself; name an earlier study"),
    ],
)
def test_bad_warm_start_is_one_line_and_writes_nothing(source, write_spec, capsys, tmp_path, warm_start, message):
    spec = write_spec(TARGET.replace("{{study: small, top: 1}}", warm_start), "bad.yaml")
    code, out, err = run(capsys, "run", str(spec))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(spec) in lines[0], err
    assert not (tmp_path / "runs" / "full").exists()


def test_source_measuring_another_metric_is_refused(source, write_spec, capsys, tmp_path):
    spec = write_spec(TARGET.replace("study: full", "study: full\nmetric: train_loss\ndirection: minimize"), "loss.yaml")
    code, _, err = run(capsys, "run", str(spec))
    assert code == 2 and "warm_start.study: 'small' measures ['val_acc'] ['maximize']" in err
    assert not (tmp_path / "runs" / "full").exists()


def test_validate_names_where_the_earlier_study_is(write_spec, capsys, tmp_path):
    spec = write_spec(TARGET.replace("{{study: small, top: 1}}", "{{study: small, storage: sqlite:///old/s.db, top: 2}}"), "v.yaml")
    code, out, _ = run(capsys, "validate", str(spec))
    assert code == 0
    assert (
        f"warm start: imports the finished trials of study small in sqlite:///{tmp_path / 'old' / 's.db'}, its best 2 re-evaluated first;"
        " they inform the sampler until 10 of this study's own trials finished" in out  # the budget's start-up: trials / 8, at least 3
    )
    assert not (tmp_path / "old").exists() and not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------- the sampler sees imported values at this study's scale


def _trial(x: float, value: float, **attrs: object):
    import optuna

    return optuna.trial.create_trial(
        params={"x": x},
        distributions={"x": optuna.distributions.FloatDistribution(0.0, 1.0)},
        values=[value],
        user_attrs=attrs,
    )


def test_import_shift_comes_from_the_re_evaluated_configs_then_from_medians():
    from hpsearch.study.counts import IMPORTED_FROM
    from hpsearch.study.warmstart import import_shift

    imported = [_trial(0.1 * i, 0.70 + 0.01 * i, **{IMPORTED_FROM: {"study": "s", "trial": i}}) for i in range(10)]
    assert import_shift([]) == []
    assert import_shift(imported) == [0.0]  # nothing of this study's own yet
    again = [_trial(0.9, 0.88, re_evaluates={"study": "s", "trial": 9}), _trial(0.8, 0.86, re_evaluates={"study": "s", "trial": 8})]
    assert import_shift(imported + again) == pytest.approx([0.085])  # median of 0.88 - 0.79 and 0.86 - 0.78
    own = [_trial(0.5, v) for v in (0.80, 0.84, 0.85)]
    assert import_shift(imported + own[:2]) == [0.0]  # fewer than 3 own trials and no re-evaluation
    assert import_shift(imported + own) == pytest.approx([0.84 - 0.745])  # top: 0, the medians matched


def test_tpe_behind_the_warm_sampler_keeps_the_earlier_good_region():
    """The earlier study found x near 0.9 good, on a scale 0.1 below this study's: its trials
    must stay among TPE's good ones once this study's own (mediocre, x near 0.1) trials finish."""
    import optuna

    from hpsearch.study.counts import IMPORTED_FROM
    from hpsearch.study.warmstart import WarmSampler

    def fill(study: optuna.Study) -> None:
        for i in range(20):  # the earlier study: value rises with x
            x = i / 19
            study.add_trial(_trial(x, 0.6 + 0.2 * x, **{IMPORTED_FROM: {"study": "s", "trial": i}}))
        study.add_trial(_trial(1.0, 0.9, re_evaluates={"study": "s", "trial": 19}))  # its best here: 0.8 -> 0.9
        for x in (0.05, 0.1, 0.15):
            study.add_trial(_trial(x, 0.82))  # this study's own: above every imported value, below the re-evaluated best

    picks = {}
    for name, wrap in (("raw", lambda s: s), ("shifted", WarmSampler)):
        sampler = wrap(optuna.samplers.TPESampler(seed=0, n_startup_trials=0))
        study = optuna.create_study(direction="maximize", sampler=sampler)
        fill(study)
        picks[name] = [study.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)}).params["x"] for _ in range(20)]
    mean = {k: sum(v) / len(v) for k, v in picks.items()}
    assert mean["shifted"] > 0.7, mean  # TPE keeps to the earlier good region
    assert mean["shifted"] > mean["raw"], mean


def test_imported_trials_inform_the_sampler_until_enough_own_trials_completed():
    """They stand in for the random start-up: once ``until`` own trials completed, TPE follows
    this study's trials alone, even where the earlier study ranked the space otherwise."""
    import optuna

    from hpsearch.study.counts import IMPORTED_FROM
    from hpsearch.study.warmstart import WarmSampler, _ShiftedView

    def fill(study: optuna.Study) -> None:
        for i in range(30):  # the earlier study: value rises with x (its setting favoured large x)
            x = i / 29
            study.add_trial(_trial(x, 0.6 + 0.2 * x, **{IMPORTED_FROM: {"study": "s", "trial": i}}))
        for i in range(10):  # this study's own: small x is best here
            x = 0.05 + 0.1 * i
            study.add_trial(_trial(x, 0.9 - 0.1 * x))

    picks = {}
    for until in (10, 1000):
        study = optuna.create_study(
            direction="maximize", sampler=WarmSampler(optuna.samplers.TPESampler(seed=0, n_startup_trials=0), until)
        )
        fill(study)
        seen = _ShiftedView(study, until).get_trials(deepcopy=False)
        assert len(seen) == (10 if until == 10 else 40)
        picks[until] = [study.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)}).params["x"] for _ in range(20)]
    mean = {k: sum(v) / len(v) for k, v in picks.items()}
    assert mean[10] < 0.5 < mean[1000], mean  # its own trials: small x; kept for good, the 30 imported ones pull TPE to large x
    assert mean[1000] - mean[10] > 0.25, mean


def test_pruned_own_trials_count_toward_until_as_tpe_counts_its_start_up():
    import optuna

    from hpsearch.study.counts import IMPORTED_FROM
    from hpsearch.study.warmstart import _ShiftedView

    study = optuna.create_study(direction="maximize")
    for i in range(5):
        study.add_trial(_trial(i / 5, 0.5, **{IMPORTED_FROM: {"study": "s", "trial": i}}))
    for i in range(3):
        study.add_trial(_trial(0.1 * i, 0.8))
    pruned = optuna.trial.create_trial(
        params={"x": 0.9},
        distributions={"x": optuna.distributions.FloatDistribution(0.0, 1.0)},
        state=optuna.trial.TrialState.PRUNED,
        intermediate_values={1: 0.3},
    )
    study.add_trial(pruned)
    assert len(_ShiftedView(study, 5).get_trials(deepcopy=False)) == 9  # 4 own finished of 5: imported ones still seen
    study.add_trial(pruned)
    assert len(_ShiftedView(study, 5).get_trials(deepcopy=False)) == 5  # 5 own (3 completed, 2 pruned): own alone


def test_until_defaults_to_the_samplers_start_up(write_spec):
    from hpsearch.spec.loader import load_spec

    def until(sampler: str, warm: str) -> int:
        text = TARGET.replace("sampler: {{name: tpe, seed: 0}}", sampler).replace("{{study: small, top: 1}}", warm)
        return load_spec(write_spec(text, "u.yaml")).warm_until

    assert until("sampler: {{name: tpe}}", "{{study: small}}") == 10  # TPE keeps Optuna's 10 start-up trials (hpsearch/spec/defaults.py)
    assert until("sampler: {{name: tpe, startup_trials: 4}}", "{{study: small}}") == 4
    assert until("sampler: {{name: tpe, startup_trials: 0}}", "{{study: small}}") == 1  # still informs the first trial
    assert until("sampler: {{name: tpe, startup_trials: 4}}", "{{study: small, until: 7}}") == 7


def test_the_study_samples_through_the_warm_sampler_with_the_specs_until(source, write_spec):
    import optuna

    from hpsearch.spec.loader import load_spec
    from hpsearch.study.open import open_study
    from hpsearch.study.warmstart import WarmSampler

    spec = load_spec(write_spec(TARGET.replace("{{study: small, top: 1}}", "{{study: small, until: 4}}"), "until.yaml"))
    with contextlib.redirect_stdout(io.StringIO()):
        study = open_study(spec)
    assert isinstance(study.sampler, WarmSampler) and study.sampler.until == 4
    assert isinstance(study.sampler.inner, optuna.samplers.TPESampler)
