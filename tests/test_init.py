"""`hpsearch init` (issue #37): the options a script's --help shows (argparse, click, typer, Hydra),
the ranges proposed, the spec written, and a file never overwritten. The specs running as written
are in tests/test_command_scripts.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.spec.loader import load_spec
from hpsearch.tools.describe import validate_spec
from hpsearch.tools.helptext import parse_help
from hpsearch.tools.init_probe import probe
from hpsearch.tools.init_spec import init
from hpsearch.tools.init_write import flag_rows, metric_rows, propose

SCRIPTS = Path(__file__).resolve().parent / "scripts"

TYPER = """
 Usage: train.py [OPTIONS]

╭─ Options ──────────────────────────────────────────────────────────────────╮
│ --epochs                    INTEGER  number of epochs [default: 10]        │
│ --lr                        FLOAT    learning rate [default: 0.001]        │
│ --batch-size          -b    INTEGER  [default: 32]                         │
│ --amp           --no-amp             mixed precision [default: amp]        │
│ --install-completion                 Install completion for the current    │
│                                      shell.                                │
│ --help                               Show this message and exit.           │
╰────────────────────────────────────────────────────────────────────────────╯
"""


def options(text: str) -> dict[str, tuple]:
    return {o.key: (o.flag, o.takes_value, o.negatable, o.default if o.has_default else None, o.type) for o in parse_help(text).options}


def help_of(script: str) -> str:
    return subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True, text=True, check=True).stdout


def test_argparse_help_gives_flags_defaults_and_booleans() -> None:
    found = options(help_of("mnist_example.py"))
    assert found["batch_size"] == ("--batch-size", True, False, 64, "int")
    assert found["lr"] == ("--lr", True, False, 1.0, "float")
    assert found["dry_run"] == ("--dry-run", False, False, False, "bool")  # store_true: off unless given
    assert found["log_interval"][3] is None  # its help shows no default
    imagenet = options(help_of("imagenet_like.py"))
    assert imagenet["amp"] == ("--amp", False, True, None, "bool")  # BooleanOptionalAction: --amp, --no-amp
    assert imagenet["wd"][:2] == ("--wd", True) and "help" not in imagenet


def test_click_and_typer_help_give_types_and_negatable_pairs() -> None:
    click = options(help_of("click_train.py"))
    assert click["batch_size"] == ("--batch-size", True, False, 32, "int")
    assert click["amp"] == ("--amp", False, True, True, "bool") and click["tied"] == ("--tied", False, False, False, "bool")
    assert parse_help(help_of("click_train.py")).options[3].choices == ["sgd", "adam"]
    typer = options(TYPER)
    assert typer == {
        "epochs": ("--epochs", True, False, 10, "int"),
        "lr": ("--lr", True, False, 0.001, "float"),
        "batch_size": ("--batch-size", True, False, 32, "int"),
        "amp": ("--amp", False, True, True, "bool"),
    }


@pytest.mark.parametrize(
    ("key", "default", "entry"),
    [
        ("lr", 0.001, {"float": [0.0001, 0.01], "log": True}),
        ("learning_rate", None, {"float": [1.0e-5, 1.0e-1], "log": True}),
        ("weight_decay", 0.0, {"float": [1.0e-6, 1.0e-1], "log": True}),
        ("per_device_train_batch_size", 8, {"choice": [4, 8, 16]}),
        ("dropout", 0.1, {"float": [0.0, 0.5]}),
        ("momentum", 0.9, {"float": [0.8, 0.99]}),
        ("warmup_steps", 500, {"int": [0, 1000]}),
        ("warmup_ratio", 0.05, {"float": [0.0, 0.2]}),
        ("warmup_ratio", None, {"float": [0.0, 0.2]}),  # HF's, whose --help shows no default: a fraction, not steps
        ("warmup_epochs", None, {"int": [0, 3]}),
        ("warmup_steps", None, {"int": [0, 1000]}),
        ("test_batch_size", 1000, None),
        ("epochs", 10, None),
    ],
)
def test_ranges_are_proposed_for_names_hpsearch_recognises(key: str, default: object, entry: dict | None) -> None:
    made = propose(key, default)
    assert (made[0] if made else None) == entry


HF_HELP = """usage: run_glue.py [-h] [--learning_rate LEARNING_RATE] [--fp16 [FP16]] [--use_amp USE_AMP] [--do_train]

options:
  -h, --help            show this help message and exit
  --learning_rate LEARNING_RATE
                        The initial learning rate for AdamW. (default: 5e-05)
  --fp16 [FP16]         Whether to use fp16 (mixed) precision (default: False)
  --use_amp USE_AMP     Mixed precision, parsed by a str2bool (default: True)
  --do_train            Whether to run training. (default: False)
"""


def test_a_flag_that_takes_true_or_false_gets_python_booleans() -> None:
    """HfArgumentParser's ``--fp16 [FP16]`` (nargs='?', a str2bool) and a ``--use_amp USE_AMP`` str2bool take a value:
    ``--use_amp`` alone fails ("expected one argument"), so they are passed as Python prints their default."""
    found = options(HF_HELP)
    assert found["fp16"] == ("--fp16", True, False, False, "bool") and found["use_amp"] == ("--use_amp", True, False, True, "bool")
    assert found["do_train"] == ("--do_train", False, False, False, "bool")
    assert parse_help(HF_HELP).options[1].help == "Whether to use fp16 (mixed) precision (default: False)"  # not "[FP16] ..."
    rows, _ = flag_rows(parse_help(HF_HELP).options)
    text = "\n".join(code for code, _ in rows)
    assert "booleans: store_true" in text and "fp16: {booleans: python}" in text and "use_amp: {booleans: python}" in text


def test_the_probe_reads_both_streams_and_every_metric_of_a_step(tmp_path: Path) -> None:
    """HF's Trainer with logging and evaluation per epoch prints its train dict, then its eval dict, at the same
    epoch, with tqdm's bar on stderr (no newline before the dict): the probe sees the eval metrics, picks the
    held-out loss, and knows the steps are epochs (no pruner warm-up in other units)."""
    (tmp_path / "trainer.py").write_text(
        "import sys\n"
        "for epoch in (1, 2, 3):\n"
        "    sys.stderr.write('\\r100%|####| 4/4 [00:00<00:00, 50.0it/s]'); sys.stderr.flush()\n"
        "    print({'loss': 0.5 / epoch, 'learning_rate': 5e-05, 'epoch': float(epoch)}, flush=True)\n"
        "    print({'eval_loss': 0.6 / epoch, 'eval_accuracy': 0.8, 'eval_runtime': 0.01, 'epoch': float(epoch)}, flush=True)\n"
    )
    probed = probe(["python", "trainer.py"], tmp_path, 20)
    assert {"loss", "eval_loss", "eval_accuracy"} <= set(probed.names()) and probed.unit == "the 'epoch' key"
    metric, rows = metric_rows(probed)
    assert metric == "eval_loss" and not any(code.startswith("pruner:") for code, _ in rows)


def test_the_probe_finds_the_log_a_script_writes_and_the_spec_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """YOLOv5 prints a table no format reads and writes runs/train/exp/results.csv: the spec reads that
    file (in a folder per trial), and its metric is the mAP, not a training loss."""
    shutil.copy(SCRIPTS / "yolov5_like.py", tmp_path)
    (tmp_path / "data" / "hyps").mkdir(parents=True)
    (tmp_path / "data" / "hyps" / "hyp.scratch-low.yaml").write_text(
        "lr0: 0.01\nlrf: 0.01\nmomentum: 0.937\nweight_decay: 0.0005\nwarmup_epochs: 3.0\nbox: 0.05\ncls: 0.5\nobj: 1.0\n"
    )
    monkeypatch.chdir(tmp_path)
    said = init(["python", "yolov5_like.py", "--epochs", "3"], tmp_path / "y.yaml", probe_s=30)
    spec = yaml.safe_load((tmp_path / "y.yaml").read_text())
    assert spec["objective"]["metrics"] == "csv" and spec["objective"]["logs"] == "runs/train/exp/results.csv"
    assert spec["objective"]["workdir"] == "trial" and (spec["metric"], spec["direction"]) == ("metrics_mAP_0.5", "maximize")
    assert "seen in runs/train/exp/results.csv" in (tmp_path / "y.yaml").read_text() and "metric metrics_mAP_0.5" in said


def test_a_log_s_run_folders_become_a_glob(tmp_path: Path) -> None:
    from hpsearch.tools.init_logs import snapshot, written

    before = snapshot(tmp_path)
    run = tmp_path / "lightning_logs" / "version_0"
    run.mkdir(parents=True)
    (run / "metrics.csv").write_text("epoch,step,val_loss\n0,19,0.9\n1,39,0.7\n")
    (tmp_path / "other.csv").write_text("epoch,x\n0,1\n")  # fewer steps: not the one
    seen = written(tmp_path, before)
    assert seen is not None and (seen.kind, seen.glob, seen.unit) == ("csv", "lightning_logs/version_*/metrics.csv", "the 'epoch' column")
    assert seen.rows == [(0, {"val_loss": 0.9}), (1, {"val_loss": 0.7})]


def test_a_hydra_app_gets_overrides_with_its_keys_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(SCRIPTS / "hydra_like.py", tmp_path)
    monkeypatch.chdir(tmp_path)
    said = init(["python", "hydra_like.py"], tmp_path / "search.yaml", probe_s=5)
    assert "flags form: hydra" in said and "metric val_loss, minimize (seen in the probe)" in said
    spec = yaml.safe_load((tmp_path / "search.yaml").read_text())
    assert spec["objective"]["flags"] == {
        "form": "hydra",
        "keys": {"lr": {"name": "optimizer.lr"}, "dropout": {"name": "model.dropout"}, "weight_decay": {"name": "optimizer.weight_decay"}},
    }
    text = validate_spec(load_spec(tmp_path / "search.yaml"), samples=3)
    argv = next(line for line in text.splitlines() if line.startswith("argv of sample 1: "))
    assert "hydra_like.py optimizer.lr=" in argv and " model.dropout=" in argv and "--" not in argv


def test_a_script_without_help_still_gets_a_spec_with_its_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """nanoGPT's configurator has no --help; the probe still sees `step N: ... val loss` in iterations."""
    shutil.copy(SCRIPTS / "nanogpt_like.py", tmp_path)
    monkeypatch.chdir(tmp_path)
    said = init(["python", "nanogpt_like.py", "--max_iters=100"], tmp_path / "s.yaml", probe_s=5)
    assert "--help listed no options" in capsys.readouterr().out and "metric val_loss" in said
    text = (tmp_path / "s.yaml").read_text()
    spec = yaml.safe_load(text)
    assert spec["objective"]["command"] == "python nanogpt_like.py --max_iters=100"
    assert spec["pruner"] == {"warmup_epochs": 100} and "steps are 'step N' here (0, 50, 100" in text


def test_init_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "search.yaml"
    out.write_text("mine\n")
    assert main(["init", "-o", str(out), "--", "python", str(SCRIPTS / "click_train.py")]) == 2
    assert f"error: {out} exists; pass --force to overwrite it, or -o another file" in capsys.readouterr().err
    assert out.read_text() == "mine\n"
    assert main(["init", "-o", str(out), "--force", "--", "python", str(SCRIPTS / "click_train.py")]) == 0
    assert "metric: val_loss" in out.read_text() and "next: hpsearch validate" in capsys.readouterr().out
