"""A script as it is (issue #37), the studies: each family of tests/scripts/ searched with pruning on
the step it prints, exported and trained with no script edited; a Lightning-shaped script with two
workers and a folder per trial; `hpsearch init` specs that run as written. The fast half is
tests/test_command_formats.py."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import optuna
import pytest
import yaml
from conftest import cli

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def script(name: str) -> ModuleType:
    """A script of tests/scripts as a module, for its curve (what it prints for given flags)."""
    spec = importlib.util.spec_from_file_location(f"family_{name}", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Family:
    script: str
    objective: str  # the objective's lines besides its command
    metric: str
    direction: str
    fixed: str
    param: str
    good: float
    bad: float
    warmup: int  # pruner.warmup_epochs, in the script's steps
    steps: list[int]  # the steps the script reports
    curve: Callable[[ModuleType, float, int], float]  # the metric at a step, for the searched value
    pruned_at: int  # the first step after the warm-up: where the bad trial is pruned
    args: str = ""  # the command's own arguments after the script


FAMILIES = {
    "argparse-mnist": Family(
        "mnist_example",
        "flags: {names: dashes, booleans: store_true}",
        "average_loss",
        "minimize",
        "{epochs: 4, gamma: 0.7, dry_run: false, no_cuda: true}",
        "lr",
        1.0,
        0.01,
        1,
        [1, 2, 3, 4],
        lambda m, lr, step: m.test_loss(lr, 0.7, 64, step),
        2,
    ),
    "word-lm": Family(
        "word_lm",
        "flags: {booleans: store_true, keys: {log_interval: {name: log-interval}}}",
        "valid_loss",
        "minimize",
        "{epochs: 4, tied: true, log_interval: 1000, dry_run: false}",
        "lr",
        20.0,
        0.2,
        1,
        [1, 2, 3, 4],
        lambda m, lr, step: m.valid_loss(lr, 0.2, True, step),
        2,
    ),
    "nanogpt": Family(
        "nanogpt_like",
        "flags: {booleans: python}",
        "val_loss",
        "minimize",
        "{max_iters: 200, dropout: 0.1, compile: false}",
        "learning_rate",
        6e-4,
        6e-6,
        50,
        [0, 50, 100, 150, 200],
        lambda m, lr, step: m.val_loss(lr, 0.1, False, step),
        100,
    ),
    "hydra": Family(
        "hydra_like",
        "flags: {form: hydra, keys: {lr: {name: optimizer.lr}, seed: {new: true}}}",
        "val_loss",
        "minimize",
        "{trainer: {max_epochs: 4}, model: {dropout: 0.1}, seed: 3}",
        "lr",
        0.01,
        1.0e-4,
        1,
        [1, 2, 3, 4],
        lambda m, lr, step: m.val_loss(lr, 0.1, step),
        2,
    ),
    "hf-dicts": Family(
        "hf_trainer_like",
        "flags: {form: space}",
        "eval_loss",
        "minimize",
        "{num_train_epochs: 4, warmup_ratio: 0.1, fp16: true}",
        "learning_rate",
        5e-5,
        5e-7,
        1,
        [1, 2, 3, 4],
        lambda m, lr, step: m.eval_loss(lr, 0.1, step),
        2,
    ),
    "keras": Family(
        "keras_like",
        "metrics: auto",
        "val_accuracy",
        "maximize",
        "{epochs: 4, batch_size: 32}",
        "lr",
        1e-3,
        1e-5,
        1,
        [1, 2, 3, 4],
        lambda m, lr, step: m.val_accuracy(lr, 32, step),
        2,
    ),
    "imagenet": Family(
        "imagenet_like",
        "flags: {names: dashes, booleans: store_true, keys: {amp: {booleans: negatable}}}",
        "acc_1",
        "maximize",
        "{epochs: 4, weight_decay: 1.0e-4, pretrained: true, amp: false}",
        "lr",
        0.1,
        0.001,
        0,
        [0, 1, 2, 3],
        lambda m, lr, step: m.acc1(lr, 1e-4, True, False, step),
        1,
    ),
    "fastai": Family(  # a table: a header over one row per epoch, counted from 0
        "fastai_like",
        "flags: {booleans: store_true}",
        "accuracy",
        "maximize",
        "{epochs: 4, bs: 64, mixup: false}",
        "lr",
        2e-3,
        2e-5,
        0,
        [0, 1, 2, 3],
        lambda m, lr, step: m.accuracy(lr, step),
        1,
    ),
    "ultralytics": Family(  # key=value words (Hydra's form), results.csv rewritten whole each epoch, epochs from 1
        "ultralytics_like",
        "flags: {form: hydra}\n  metrics: csv\n  logs: runs/detect/train*/results.csv\n  workdir: trial",
        "metrics_mAP50-95(B)",
        "maximize",
        "{epochs: 4, amp: false, data: coco8.yaml}",
        "lr0",
        0.01,
        0.0001,
        1,
        [1, 2, 3, 4],
        lambda m, lr, step: m.map50_95(lr, step),
        2,
    ),
    "mmengine": Family(  # --cfg-options a.b=1 (Hydra's form after a flag), JSON lines in a timestamped run folder
        "mmdet_like",
        "flags: {form: hydra, keys: {lr: {name: optim_wrapper.optimizer.lr}}}\n  metrics: jsonl\n"
        "  logs: work_dirs/*/*/vis_data/scalars.json\n  workdir: trial",
        "coco_bbox_mAP",
        "maximize",
        "{train_cfg: {max_epochs: 4}}",
        "lr",
        0.01,
        0.0001,
        1,
        [1, 2, 3, 4],
        lambda m, lr, step: m.bbox_map(lr, step),
        2,
        " configs/retinanet.py --cfg-options",
    ),
    "detectron2": Family(  # yacs pairs, JSON lines in OUTPUT_DIR/metrics.json, steps in iterations counted from 0
        "detectron2_like",
        "flags: {form: pairs, booleans: python, keys: {lr: {name: SOLVER.BASE_LR}}}\n  metrics: jsonl\n"
        "  logs: output/metrics.json\n  workdir: trial",
        "bbox_AP",
        "maximize",
        "{SOLVER: {MAX_ITER: 300, AMP: {ENABLED: true}}, TEST: {EVAL_PERIOD: 100}}",
        "lr",
        0.02,
        0.0002,
        99,
        [99, 199, 299],
        lambda m, lr, step: m.bbox_ap(lr, step),
        199,
    ),
    "lightning-csv": Family(
        "lightning_like",
        "metrics: csv\n  logs: lightning_logs/version_*/\n  workdir: trial",
        "val_loss",
        "minimize",
        "{max_epochs: 4, logger: csv}",
        "lr",
        0.01,
        1.0e-4,
        0,
        [0, 1, 2, 3],
        lambda m, lr, step: m.val_loss(lr, step),
        1,
    ),
}

SPEC = """\
study: {name}
objective:
  command: python {script}.py{args}
  {objective}
metric: {metric}
direction: {direction}
budget: {{trials: 2}}
sampler: {{name: random, seed: 1}}
pruner: {{name: median, startup_trials: 1, warmup_epochs: {warmup}, trust: null}}  # the median alone: pruned on the step the script prints
fixed: {fixed}
space:
  {param}: {{float: [{low}, {high}], log: true}}
warm_start: [{{{param}: {good}}}, {{{param}: {bad}}}]
"""


def study(folder: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{folder / 'runs' / name / 'study.db'}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_script_family_is_searched_pruned_exported_and_trained(tmp_path: Path, name: str) -> None:
    """The good warm start completes with the curve its flags give, step by step as the script counts;
    the bad one is pruned at the first step after the warm-up; the export trains to the same value."""
    family = FAMILIES[name]
    shutil.copy(SCRIPTS / f"{family.script}.py", tmp_path)
    low, high = sorted((family.good, family.bad))
    text = SPEC.format(name=name, low=low / 10, high=high * 10, **vars(family))
    (tmp_path / "spec.yaml").write_text(text)
    ran = cli("run", "spec.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    best, bad = study(tmp_path, name).trials
    module = script(family.script)
    assert best.state == optuna.trial.TrialState.COMPLETE, best.user_attrs
    assert best.intermediate_values == pytest.approx({s: family.curve(module, family.good, s) for s in family.steps})
    assert best.user_attrs["epochs"] == family.steps[-1]
    assert bad.state == optuna.trial.TrialState.PRUNED and bad.user_attrs["reason"] == f"pruned at epoch {family.pruned_at}"
    assert max(bad.intermediate_values) == family.pruned_at
    assert cli("export", "spec.yaml", "-o", "best.yaml", cwd=tmp_path).returncode == 0
    exported = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert exported["config"][family.param] == family.good
    trained = cli("train", "best.yaml", "-o", "final", cwd=tmp_path)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    final = json.loads((tmp_path / "final" / "metrics.json").read_text())
    assert final[family.metric] == pytest.approx(best.value)
    history = [json.loads(line)["epoch"] for line in (tmp_path / "final" / "history.jsonl").read_text().splitlines()]
    assert history == family.steps  # the final run reports the same steps


def test_the_families_cover_the_issue_s_styles() -> None:
    """argparse (store_true, dashes), nanoGPT's configurator, Hydra overrides, dict reprs, Keras,
    word_language_model and mnist: each has its study above."""
    assert {"argparse-mnist", "nanogpt", "hydra", "hf-dicts", "keras", "word-lm", "detectron2", "fastai", "ultralytics", "mmengine"} <= set(
        FAMILIES
    )
    assert all((SCRIPTS / f"{f.script}.py").is_file() for f in FAMILIES.values())


LIGHTNING = """\
study: lightning
objective:
  command: python lightning_like.py
  metrics: tensorboard
  logs: lightning_logs/version_*/
  workdir: trial
metric: val_loss
direction: minimize
budget: {trials: 4}
sampler: {name: random, seed: 1}
pruner: {name: median, startup_trials: 1, warmup_epochs: 20, trust: null}
fixed: {max_epochs: 4}
space:
  lr: {float: [1.0e-5, 1.0], log: true}
warm_start: [{lr: 0.01}, {lr: 0.02}, {lr: 1.0e-4}, {lr: 0.9}]
"""


@pytest.mark.slow
def test_a_lightning_shaped_script_with_two_workers_and_a_folder_per_trial(tmp_path: Path) -> None:
    """TensorBoard events under lightning_logs/version_N/, pruned on the logged (global) step; each
    trial writes its own version_0, none in the spec's folder."""
    shutil.copy(SCRIPTS / "lightning_like.py", tmp_path)
    (tmp_path / "spec.yaml").write_text(LIGHTNING)
    checked = cli("validate", "spec.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "workdir: each trial runs in its own folder" in checked.stdout and "/trial-<n>/work" in checked.stdout
    ran = cli("run", "spec.yaml", "--workers", "2", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    trials = study(tmp_path, "lightning").trials
    module = script("lightning_like")
    steps = [19, 39, 59, 79]  # val_loss is logged at each epoch's last global step
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert {t.params["lr"] for t in done} >= {0.01, 0.02}
    assert all(t.intermediate_values == pytest.approx({s: module.val_loss(t.params["lr"], s // 20) for s in steps}) for t in done)
    assert pruned and all(t.user_attrs["reason"] == "pruned at epoch 39" for t in pruned)
    assert not (tmp_path / "lightning_logs").exists()
    for t in trials:
        work = tmp_path / "runs" / "lightning" / f"trial-{t.number}" / "work" / "lightning_logs"
        assert [p.name for p in work.iterdir()] == ["version_0"]


YOLOV5 = """\
study: yolo
objective:
  command: python yolov5_like.py --hyp $HPSEARCH_CONFIG_FILE --epochs 4 --batch-size 16
  config_file: data/hyps/hyp.scratch-low.yaml
  metrics: csv
  logs: runs/train/exp*/results.csv
  workdir: trial
metric: "metrics_mAP_0.5:0.95"
direction: maximize
budget: {trials: 3}
sampler: {name: random, seed: 1}
pruner: {name: median, startup_trials: 1, warmup_epochs: 0, trust: null}
fixed: {momentum: 0.937, data: data/hyps/}   # a path in the spec's folder, written absolute for the trial
space:
  lr0: {float: [1.0e-4, 1.0e-1], log: true}
warm_start: [{lr0: 0.01}, {lr0: 0.0002}, {lr0: 0.012}]
"""
HYP = "lr0: 0.02  # initial learning rate\nlrf: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\nwarmup_epochs: 3.0\nbox: 0.05\ncls: 0.5\nobj: 1.0\n"


@pytest.mark.slow
def test_a_yolov5_shaped_script_takes_its_hyperparameters_from_a_file(tmp_path: Path) -> None:
    """YOLOv5 reads lr0 and momentum from --hyp hyp.yaml: each trial gets a copy of the base file with its values,
    at $HPSEARCH_CONFIG_FILE, and no flags; results.csv (padded names, epochs from 0) gives the curve; the bad
    trial is pruned at epoch 1; the export trains with its own copy."""
    shutil.copy(SCRIPTS / "yolov5_like.py", tmp_path)
    (tmp_path / "data" / "hyps").mkdir(parents=True)
    (tmp_path / "data" / "hyps" / "hyp.scratch-low.yaml").write_text(HYP)
    (tmp_path / "spec.yaml").write_text(YOLOV5)
    checked = cli("validate", "spec.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "--hyp '$HPSEARCH_CONFIG_FILE' --epochs 4 --batch-size 16\n" in checked.stdout  # no flags appended
    assert 'with {"momentum": 0.937, "data": "data/hyps/", "lr0": ' in checked.stdout
    ran = cli("run", "spec.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    good, bad, close = study(tmp_path, "yolo").trials
    module = script("yolov5_like")
    assert good.intermediate_values == pytest.approx({e: module.map50_95(0.01, 0.937, e) for e in range(4)}, abs=1e-4)
    assert bad.state == optuna.trial.TrialState.PRUNED and bad.user_attrs["reason"] == "pruned at epoch 1"
    copy = yaml.safe_load((tmp_path / "runs" / "yolo" / "trial-0" / "hyp.scratch-low.yaml").read_text())
    hyp = {"lr0": 0.01, "lrf": 0.01, "momentum": 0.937, "weight_decay": 0.0005, "warmup_epochs": 3.0, "box": 0.05, "cls": 0.5}
    assert copy == {**hyp, "obj": 1.0, "data": str(tmp_path / "data" / "hyps")}
    assert cli("export", "spec.yaml", "-o", "best.yaml", cwd=tmp_path).returncode == 0
    trained = cli("train", "best.yaml", "-o", "final", cwd=tmp_path)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    best = max((good, close), key=lambda t: t.value)
    assert json.loads((tmp_path / "final" / "metrics.json").read_text())["metrics_mAP_0.5:0.95"] == pytest.approx(best.value)
    assert yaml.safe_load((tmp_path / "final" / "hyp.scratch-low.yaml").read_text())["lr0"] == best.params["lr0"]


INIT_CASES = {
    "argparse": ("mnist_example.py", "average_loss", "minimize", {"lr", "batch_size"}, "names: dashes"),
    "click": ("click_train.py", "val_loss", "minimize", {"lr", "batch_size"}, "booleans: store_true"),
    # HfArgumentParser's help shows no defaults: warmup_ratio is still a fraction, --fp16 [FP16] an optional value
    "hf": ("hf_trainer_like.py", "eval_loss", "minimize", {"learning_rate", "per_device_train_batch_size", "warmup_ratio"}, "# fp16:"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(INIT_CASES))
def test_init_writes_a_spec_that_runs_as_written(tmp_path: Path, case: str) -> None:
    name, metric, direction, searched, style = INIT_CASES[case]
    shutil.copy(SCRIPTS / name, tmp_path)
    made = cli("init", "-o", "search.yaml", "--probe", "10", "--", "python", name, cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "wrote search.yaml" in made.stdout and "next: hpsearch validate search.yaml" in made.stdout
    text = (tmp_path / "search.yaml").read_text()
    spec = yaml.safe_load(text)
    assert (spec["metric"], spec["direction"]) == (metric, direction) and style in text
    assert set(spec["space"]) == searched
    again = cli("init", "-o", "search.yaml", "--", "python", name, cwd=tmp_path)
    assert again.returncode == 2 and "search.yaml exists; pass --force" in again.stderr
    ran = cli("run", "search.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    trials = study(tmp_path, "search").trials
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(trials) == 20 and done and all(t.value is not None and 0 < t.value < 10 for t in done)
    assert all(set(t.params) == searched for t in trials)


HYPERBAND = """\
study: iterations
objective: {command: python nanogpt_like.py, flags: {booleans: python}}
metric: val_loss
direction: minimize
budget: {trials: 8}
pruner: {name: hyperband, warmup_epochs: 50, trust: null}   # the first rung at iteration 50; no max_epochs: the first completed trial's last step
fixed: {max_iters: 300, dropout: 0.1, compile: false}
space:
  learning_rate: {float: [1.0e-6, 1.0e-1], log: true}
warm_start: [{learning_rate: 6.0e-4}, {learning_rate: 6.0e-6}, {learning_rate: 0.06}, {learning_rate: 6.0e-5},
             {learning_rate: 0.006}, {learning_rate: 3.0e-4}, {learning_rate: 1.0e-5}, {learning_rate: 0.02}]
"""


@pytest.mark.slow
def test_hyperband_takes_its_resource_in_the_iterations_the_script_prints(tmp_path: Path) -> None:
    """No max_epochs and no fixed.epochs: Hyperband's maximum is the first completed trial's last step
    (300), its rungs are iterations 50 and 150, and every pruned trial stops at one of them."""
    shutil.copy(SCRIPTS / "nanogpt_like.py", tmp_path)
    (tmp_path / "spec.yaml").write_text(HYPERBAND)
    ran = cli("run", "spec.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    trials = study(tmp_path, "iterations").trials
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert done[0].number == 0 and all(sorted(t.intermediate_values) == list(range(0, 301, 50)) for t in done)
    assert pruned and {max(t.intermediate_values) for t in pruned} <= {50, 150}
    best = min(done, key=lambda t: t.value or 0.0)
    assert best.params["learning_rate"] == 6.0e-4
