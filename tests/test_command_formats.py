"""A script as it is (issue #37), the fast half: flag styles as argv, what `metrics: auto` reads
from each family's lines, one report per step, log folders, the error that names the style to
use, and every example line of docs/your-code.md's formats table. The studies are in
tests/test_command_scripts.py."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from hpsearch.spec.loader import SpecError, load_spec
from hpsearch.trial.command import from_entry, parse_mapping
from hpsearch.trial.command.argv import flags
from hpsearch.trial.command.lines import read_auto
from hpsearch.trial.command.logs import LogFolder, csv_rows, jsonl_rows
from hpsearch.trial.command.metrics import MetricReader
from hpsearch.trial.command.options import to_entry
from hpsearch.trial.objective import load_objective
from hpsearch.trial.reporter import Reporter
from hpsearch.trial.run import FAILED, run_trial

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "scripts"
CONFIG = {"batch_size": 32, "lr": 0.1, "tied": True, "amp": False, "sizes": [1, 2], "_min_batch_size": 4, "skip": None}


def command(mapping: dict, base: Path = SCRIPTS):
    entry, problems = parse_mapping({"command": "python x.py", **mapping}, base)
    assert problems == [], problems
    assert entry is not None and to_entry(from_entry(entry)) == entry  # what a study stores and an export ships
    return from_entry(entry)


@pytest.mark.parametrize(
    ("style", "argv"),
    [
        ({}, ["--batch_size=32", "--lr=0.1", "--tied=true", "--amp=false", "--sizes=[1, 2]"]),
        (
            {"form": "space", "names": "dashes", "booleans": "store_true"},
            ["--batch-size", "32", "--lr", "0.1", "--tied", "--sizes", "[1, 2]"],
        ),
        ({"names": "dashes", "booleans": "negatable"}, ["--batch-size=32", "--lr=0.1", "--tied", "--no-amp", "--sizes=[1, 2]"]),
        ({"booleans": "python"}, ["--batch_size=32", "--lr=0.1", "--tied=True", "--amp=False", "--sizes=[1, 2]"]),
        ({"booleans": "int"}, ["--batch_size=32", "--lr=0.1", "--tied=1", "--amp=0", "--sizes=[1, 2]"]),
        (
            {
                "booleans": "store_true",
                "keys": {"batch_size": {"name": "-b"}, "amp": {"booleans": "negatable"}, "lr": {"name": "learning-rate"}},
            },
            ["-b=32", "--learning-rate=0.1", "--tied", "--no-amp", "--sizes=[1, 2]"],
        ),
        (
            {"form": "hydra", "keys": {"lr": {"name": "optimizer.lr"}, "tied": {"new": True}}},
            ["batch_size=32", "optimizer.lr=0.1", "+tied=true", "amp=false", "sizes=[1,2]"],
        ),
        (
            {"form": "pairs", "booleans": "python", "keys": {"lr": {"name": "SOLVER.BASE_LR"}}},
            ["batch_size", "32", "SOLVER.BASE_LR", "0.1", "tied", "True", "amp", "False", "sizes", "[1, 2]"],
        ),
    ],
    ids=["default", "argparse-store_true", "negatable", "python", "int", "per-key", "hydra", "yacs-pairs"],
)
def test_a_flag_style_gives_the_argv_its_parser_takes(style: dict, argv: list[str]) -> None:
    assert flags(CONFIG, command({"flags": style}).flags) == argv


def test_hydra_nested_fixed_values_are_dotted_keys_and_strings_quoted() -> None:
    config = {"trainer": {"max_epochs": 3, "devices": [0, 1]}, "name": "run a", "path": "data/x.csv", "seed": 1}
    style = command({"flags": {"form": "hydra", "keys": {"seed": {"new": True}}}}).flags
    assert flags(config, style) == ["trainer.max_epochs=3", "trainer.devices=[0,1]", "name='run a'", "path=data/x.csv", "+seed=1"]


def test_yacs_pairs_take_nested_fixed_values_as_dotted_paths() -> None:
    config = {"SOLVER": {"MAX_ITER": 300, "AMP": {"ENABLED": True}}, "lr": 0.02}
    style = command({"flags": {"form": "pairs", "booleans": "python", "keys": {"lr": {"name": "SOLVER.BASE_LR"}}}}).flags
    assert flags(config, style) == ["SOLVER.MAX_ITER", "300", "SOLVER.AMP.ENABLED", "True", "SOLVER.BASE_LR", "0.02"]


def test_a_config_file_takes_the_values_by_their_paths_and_keeps_the_rest() -> None:
    from hpsearch.trial.command.config_file import merged

    base = {"SOLVER": {"BASE_LR": 0.02, "MAX_ITER": 90000}, "lr0": 0.01, "note": "kept"}
    style = command({"flags": {"keys": {"lr": {"name": "SOLVER.BASE_LR"}}}}).flags
    config = {"lr": 0.1, "SOLVER": {"MAX_ITER": 300}, "lr0": 0.02, "new": {"x": 1}, "_min_batch_size": 1, "off": None}
    assert merged(base, config, style) == {"SOLVER": {"BASE_LR": 0.1, "MAX_ITER": 300}, "lr0": 0.02, "note": "kept", "new": {"x": 1}}
    assert base["SOLVER"]["BASE_LR"] == 0.02  # the base itself untouched


@pytest.mark.parametrize(
    ("content", "name", "said"),
    [
        (None, "hyp.yaml", "objective.config_file: cannot read"),
        ("- a\n- b\n", "hyp.yaml", "must hold a mapping of settings, it holds a list"),
        ("a: [1\n", "hyp.yaml", "does not parse"),
        ("a: 1\n", "hyp.txt", "objective.config_file: must be a YAML or JSON file (.yaml, .yml, .json), got hyp.txt"),
    ],
    ids=["missing", "a-list", "broken", "not-yaml"],
)
def test_a_config_file_that_cannot_be_one_fails_at_load(tmp_path: Path, content: str | None, name: str, said: str) -> None:
    if content is not None:
        (tmp_path / name).write_text(content)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"study: s\nobjective: {{command: python x.py --hyp $HPSEARCH_CONFIG_FILE, config_file: {name}}}\nspace: {{lr: {{float: [0.1, 1]}}}}\n"
    )
    with pytest.raises(SpecError) as err:
        load_spec(spec, check_objective=False)
    assert f"{spec}: " in str(err.value) and said in str(err.value)


def test_an_existing_spec_keeps_its_entry_and_argv() -> None:
    """A spec written before flag styles: the stored entry and the argv are what they were."""
    entry, _ = parse_mapping({"command": "python train.py --log json", "metrics": "auto"}, SCRIPTS)
    assert entry == 'command:{"argv": ["python", "train.py", "--log", "json"], "cwd": "' + str(SCRIPTS) + '"}'
    assert flags(CONFIG, from_entry(entry or "").flags) == ["--batch_size=32", "--lr=0.1", "--tied=true", "--amp=false", "--sizes=[1, 2]"]


def test_bad_styles_are_one_line_per_key(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "study: s\nobjective:\n  command: python x.py\n  metrics: {val_loss: 'no group'}\n  logs: runs/\n"
        "  flags: {form: dashes, booleans: yes, keys: {lr: 3, seed: {name: 'a b', new: true}}}\n"
    )
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    lines = str(err.value).splitlines()
    assert f"{spec}: objective.metrics.val_loss: must be a regex with a group around the number, e.g. 'val loss ([\\d.]+)'" in lines
    assert f"{spec}: objective.flags.form: must be one of equals, space, hydra, pairs, got 'dashes'" in lines
    assert f"{spec}: objective.flags.booleans: must be one of json, python, int, store_true, negatable, got a YAML boolean" in lines
    assert f"{spec}: objective.flags.keys.lr: must be a mapping such as {{name: optimizer.lr, booleans: store_true, new: true}}" in lines
    assert f"{spec}: objective.flags.keys.seed.name: must be the script's name for the key, without spaces, got 'a b'" in lines
    assert f"{spec}: objective.flags.keys.seed.new: +name=value is Hydra's; it needs objective.flags.form: hydra" in lines
    assert f"{spec}: objective.logs: is where metrics: tensorboard, csv or jsonl reads; metrics is regex" in lines


# ---------------------------------------------------------------------------- lines


@pytest.mark.parametrize(
    ("line", "step", "metrics", "inside"),
    [
        ("step 100: train loss 4.1200, val loss 4.2300", 100, {"train_loss": 4.12, "val_loss": 4.23}, False),
        ("iter 100: loss 4.2000, time 30.50ms, mfu 10.20%", 100, {"loss": 4.2, "time": 30.5, "mfu": 10.2}, False),
        (
            "| end of epoch   1 | time:  3.21s | valid loss  6.12 | valid ppl   454.32",
            1,
            {"time": 3.21, "valid_loss": 6.12, "valid_ppl": 454.32},
            False,
        ),
        (
            "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.60 | loss  7.63 | ppl  2064.81",
            1,
            {"lr": 20.0, "ms/batch": 45.6, "loss": 7.63, "ppl": 2064.81},
            True,
        ),
        ("{'eval_loss': 0.41, 'eval_accuracy': 0.87, 'epoch': 1.0}", 1, {"eval_loss": 0.41, "eval_accuracy": 0.87}, False),
        ("{'loss': 0.6931, 'learning_rate': 4.5e-05, 'epoch': 0.25}", 1, {"loss": 0.6931, "learning_rate": 4.5e-05}, True),
        ("Epoch 3/10", 3, {}, False),
        (
            "32/32 [====] - 1s 10ms/step - loss: 0.5200 - accuracy: 0.8100 - val_loss: 0.4700",
            None,
            {"loss": 0.52, "accuracy": 0.81, "val_loss": 0.47},
            False,
        ),
        ("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.301", 1, {"Loss": 2.301}, True),
        ("Test set: Average loss: 0.0331, Accuracy: 9891/10000 (99%)", None, {"average_loss": 0.0331, "Accuracy": 0.9891}, False),
        (" * Acc@1 75.200 Acc@5 92.100", None, {"acc_1": 75.2, "acc_5": 92.1}, False),
        ("Epoch [1/5], Step [100/600], Loss: 0.2", 1, {"Loss": 0.2}, True),
        ('{"epoch": 3, "val_acc": 0.91, "train_loss": 0.3}', 3, {"val_acc": 0.91, "train_loss": 0.3}, False),
        ("[12:00:01][__main__][INFO] - Epoch 2: val_loss=0.5, val_acc=0.8", 2, {"val_loss": 0.5, "val_acc": 0.8}, False),
    ],
    ids=[
        "nanogpt-eval",
        "nanogpt-iter",
        "word-lm",
        "word-lm-batch",
        "hf-eval",
        "hf-log",
        "keras-epoch",
        "keras",
        "mnist-train",
        "mnist-test",
        "imagenet",
        "tutorial",
        "json",
        "logging",
    ],
)
def test_auto_reads_each_family_s_line(line: str, step: int | None, metrics: dict, inside: bool) -> None:
    parsed = read_auto(line)
    assert parsed is not None
    assert (parsed.step, parsed.metrics, parsed.inside) == (step, pytest.approx(metrics), inside)


@pytest.mark.parametrize(
    "line",
    [
        " 45%|████▌     | 45/100 [00:01<00:02, 30.1it/s]",
        "16/32 [=====>........] - ETA: 1s - loss: 0.53",
        "\r 10%|█         | 1/10\r 20%|██        | 2/10",
        '  File "train.py", line 12, in <module>',
        "UserWarning: epoch 3 is deprecated",
    ],
)
def test_progress_bars_tracebacks_and_warnings_are_never_reports(line: str) -> None:
    assert read_auto(line) is None


class Sink:
    trial_dir = checkpoint_path = resume_from = None

    def __init__(self, names: list[str] | None = None):
        self.reports: list[tuple[int, dict[str, float]]] = []
        self.metric_names = names or []

    def report(self, step: int, metrics: dict[str, float]) -> None:
        self.reports.append((step, metrics))


def read(text: str, names: list[str] | None = None, **mapping) -> tuple[list[tuple[int, dict[str, float]]], dict[str, float]]:
    sink = Sink(names)
    reader = MetricReader(command(mapping), SCRIPTS, sink)
    for line in textwrap.dedent(text).strip("\n").splitlines():
        reader.line(line)
    reader.end()
    return sink.reports, reader.final()


def test_one_report_per_step_for_the_spec_s_metric() -> None:
    """nanoGPT: `iter` lines between evaluations go with the next `step N: val loss` report."""
    reports, final = read(
        """
        Overriding: learning_rate = 0.001
        step 0: train loss 10.5, val loss 10.6
        iter 0: loss 10.5, time 31.40ms, mfu 12.50%
        iter 10: loss 9.4, time 31.40ms, mfu 12.50%
        step 20: train loss 8.0, val loss 8.1
        iter 20: loss 8.0, time 31.40ms, mfu 12.50%
        """,
        ["val_loss"],
    )
    assert reports == [
        (0, {"train_loss": 10.5, "val_loss": 10.6}),
        (20, {"loss": 9.4, "time": 31.4, "mfu": 12.5, "train_loss": 8.0, "val_loss": 8.1}),
    ]
    assert final == {"train_loss": 8.0, "val_loss": 8.1, "loss": 8.0, "time": 31.4, "mfu": 12.5, "epochs": 20.0}


def test_a_table_s_rows_are_read_by_its_header_and_nothing_else_is() -> None:
    from hpsearch.trial.command.lines import Line, Table

    table = Table()
    assert table.read("Starting the run now") is None and table.read("it took 3 s") is None  # no step column: no table
    assert table.read("epoch     train_loss  valid_loss  accuracy  time") is None  # a header reports nothing
    assert table.read("0         0.520392    0.353110    0.858000  00:12") == Line(
        {"train_loss": 0.520392, "valid_loss": 0.35311, "accuracy": 0.858}, 0
    )
    assert table.read("0.5       0.5         0.3         0.8       00:12") is None  # no whole step
    assert table.read("1         0.42        0.25") is None  # not as many cells
    assert table.read("saved the model to 3 files") is None
    prose = Table()  # a sentence that looks like a header: a later line of words is still read_auto's
    assert prose.read("Validation at each epoch") is None and prose.read("loss 0.52 epoch 3") is None
    assert table.unit == "the 'epoch' column"


def test_a_step_on_its_own_line_holds_for_the_lines_below() -> None:
    """Keras prints `Epoch 3/10` above its metrics; mnist's test line has no epoch, its training lines do."""
    keras, _ = read(
        "Epoch 1/2\n 16/32 [===>..] - ETA: 0s - loss: 0.9\n32/32 [=====] - 0s 3ms/step - loss: 0.5 - val_loss: 0.4\nEpoch 2/2\n32/32 [=====] - 0s - loss: 0.3 - val_loss: 0.2"
    )
    assert keras == [(1, {"loss": 0.5, "val_loss": 0.4}), (2, {"loss": 0.3, "val_loss": 0.2})]
    mnist, final = read(
        """
        Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.3
        Train Epoch: 1 [59520/60000 (99%)]\tLoss: 0.4

        Test set: Average loss: 0.0500, Accuracy: 9800/10000 (98%)
        Train Epoch: 2 [0/60000 (0%)]\tLoss: 0.3
        """,
        ["average_loss"],
    )
    assert mnist == [(1, {"Loss": 0.4, "average_loss": 0.05, "Accuracy": 0.98})]
    assert final["epochs"] == 1.0


def test_hugging_face_logs_report_at_whole_epochs_with_the_latest_training_loss() -> None:
    reports, final = read(
        """
        {'loss': 0.69, 'learning_rate': 4e-05, 'epoch': 0.5}
        {'eval_loss': 0.41, 'eval_accuracy': 0.87, 'epoch': 1.0}
        {'loss': 0.5, 'learning_rate': 2e-05, 'epoch': 1.5}
        {'eval_loss': 0.35, 'eval_accuracy': 0.9, 'epoch': 2.0}
        {'train_runtime': 1.2, 'train_loss': 0.55, 'epoch': 2.0}
        """,
        ["eval_loss"],
    )
    assert [step for step, _ in reports] == [1, 2]
    assert reports[1][1] == {"loss": 0.5, "learning_rate": 2e-05, "eval_loss": 0.35, "eval_accuracy": 0.9}
    assert final["train_loss"] == 0.55 and final["eval_loss"] == 0.35  # the summary line belongs to the last step


def test_a_regex_per_metric_reads_only_its_metric() -> None:
    reports, _ = read(
        "step 100: train loss 4.1, val loss 4.2\nstep 200: train loss 3.1, val loss 3.3", None, metrics={"val_loss": r"val loss ([\d.]+)"}
    )
    assert reports == [(100, {"val_loss": 4.2}), (200, {"val_loss": 3.3})]


# ---------------------------------------------------------------------------- log folders


def _events(folder: Path, rows: list[tuple[int, str, float]]) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for step, tag, value in rows:
        writer.add_event(Event(step=step, summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))
    writer.close()


def test_the_newest_run_written_since_the_start_is_read(tmp_path: Path) -> None:
    """An earlier attempt's version_0 is never read; this trial's version_1 is, as it grows."""
    old = tmp_path / "lightning_logs" / "version_0"
    old.mkdir(parents=True)
    _events(old, [(9, "val_loss", 9.0)])
    logs = LogFolder(tmp_path / "lightning_logs" / "version_*", "tensorboard")
    assert logs.read(done=False) == []
    new = tmp_path / "lightning_logs" / "version_1"
    new.mkdir()
    _events(new, [(9, "train_loss", 1.5), (19, "val/loss", 1.2), (19, "epoch", 0.0)])
    assert logs.read(done=False) == [(9, {"train_loss": 1.5}), (19, {"val_loss": pytest.approx(1.2)})]
    assert logs.read(done=True) == []  # nothing new


def test_json_lines_use_their_step_key_and_grow() -> None:
    """detectron2's metrics.json: one object per line, `iteration` its step, `bbox/AP` at eval periods."""
    text = '{"iteration": 19, "total_loss": 0.9, "lr": 0.02}\n{"bbox/AP": 31.5, "iteration": 99}\nnot json\n{"epoch": 0.5, "loss": 1}\n'
    assert jsonl_rows(text) == [(19, {"total_loss": 0.9, "lr": 0.02}), (99, {"bbox_AP": 31.5})]


def test_a_json_lines_file_is_read_line_by_line_as_it_grows(tmp_path: Path) -> None:
    log = tmp_path / "output" / "metrics.json"
    log.parent.mkdir()
    log.write_text('{"iteration": 0, "old": 1}\n')  # an earlier attempt's line: appended to, never read again
    logs = LogFolder(tmp_path / "output" / "metrics.json", "jsonl")
    with log.open("a") as out:
        out.write('{"iteration": 19, "total_loss": 0.9}\n{"bbox/AP": 31')  # the second line is half written
    assert logs.read(done=False) == [(19, {"total_loss": 0.9})]
    with log.open("a") as out:
        out.write('.5, "iteration": 99}\n')
    assert logs.read(done=False) == [(99, {"bbox_AP": 31.5})]


def test_csv_logs_use_their_step_column() -> None:
    text = "epoch,step,train_loss,val_loss\n0,9,1.3,\n0,19,,1.1\n1,29,0.8,\n1,39,,0.6\n"
    assert csv_rows(text) == [(0, {"train_loss": 1.3}), (0, {"val_loss": 1.1}), (1, {"train_loss": 0.8}), (1, {"val_loss": 0.6})]


# ---------------------------------------------------------------------------- errors a user sees


def run_script(tmp_path: Path, script: str, config: dict, metric: str, **mapping):
    entry, problems = parse_mapping({"command": f"python {script}", **mapping}, SCRIPTS)
    assert not problems, problems
    return run_trial(load_objective(entry or ""), config, Reporter(trial_dir=tmp_path / "t"), [metric])


@pytest.mark.parametrize(
    ("script", "config", "mapping", "said", "fix"),
    [
        (
            "word_lm.py",
            {"epochs": 1, "tied": True},
            {},
            "argument --tied: ignored explicit argument 'true'",
            "objective.flags.booleans: store_true",
        ),
        (
            "nanogpt_like.py",
            {"max_iters": 50, "compile": False},
            {},
            "type mismatch for compile: 'false'",
            "objective.flags.keys.compile.booleans: python",
        ),
        ("hydra_like.py", {"seed": 3}, {"flags": {"form": "hydra"}}, "Could not override 'seed'.", "objective.flags.keys.seed.new: true"),
        (
            "mnist_example.py",
            {"epochs": 1, "batch_size": 32},
            {},
            "unrecognized arguments: --batch_size=32",
            "objective.flags.names: dashes",
        ),
        (
            "imagenet_like.py",
            {"epochs": 1, "pretrained": False},
            {"flags": {"booleans": "negatable"}},
            "unrecognized arguments: --no-pretrained",
            "booleans: store_true",
        ),
        ("hydra_like.py", {"optimizer.lr": 0.1}, {}, "unrecognized arguments: --optimizer.lr=0.1", "objective.flags.form: hydra"),
        (
            "detectron2_like.py",
            {"amp": True},
            {"flags": {"form": "pairs", "keys": {"amp": {"name": "SOLVER.AMP.ENABLED"}}}},
            "Type mismatch (<class 'bool'> vs. <class 'str'>) with values (False vs. true) for config key: SOLVER.AMP.ENABLED",
            "objective.flags.keys.amp.booleans: python",
        ),
        (
            "detectron2_like.py",
            {"lr": 0.1},
            {"flags": {"form": "pairs", "booleans": "python"}},
            "Non-existent config key: lr",
            "objective.flags.keys.lr.name",
        ),
    ],
    ids=["store_true", "python-literals", "hydra-new-key", "dashes", "no-negation", "hydra-form", "yacs-booleans", "yacs-path"],
)
def test_a_wrong_style_fails_with_the_script_s_line_and_the_option_that_fixes_it(
    tmp_path: Path, script: str, config: dict, mapping: dict, said: str, fix: str
) -> None:
    outcome = run_script(tmp_path, script, config, "x", **mapping)
    assert outcome.state == FAILED
    assert said in outcome.reason and fix in outcome.reason, outcome.reason


def test_a_default_path_the_trial_s_own_folder_lacks_says_how_to_pass_it(tmp_path: Path) -> None:
    """YOLOv5 opens data/hyps/hyp.scratch-low.yaml by default: with workdir: trial it runs elsewhere."""
    shutil.copy(SCRIPTS / "yolov5_like.py", tmp_path)
    (tmp_path / "data" / "hyps").mkdir(parents=True)
    (tmp_path / "data" / "hyps" / "hyp.scratch-low.yaml").write_text("lr0: 0.01\n")
    entry, problems = parse_mapping({"command": "python yolov5_like.py --epochs 1", "workdir": "trial"}, tmp_path)
    assert not problems
    outcome = run_trial(load_objective(entry or ""), {}, Reporter(trial_dir=tmp_path / "t"), ["x"])
    assert outcome.state == FAILED
    assert "No such file or directory: 'data/hyps/hyp.scratch-low.yaml'" in outcome.reason
    assert "the trial runs in its own (workdir: trial): pass it in the command or fixed:" in outcome.reason


def test_a_metric_the_script_never_prints_names_what_it_printed(tmp_path: Path) -> None:
    outcome = run_script(tmp_path, "word_lm.py", {"epochs": 2}, "val loss")
    assert outcome.state == FAILED and outcome.contract  # every trial would fail alike: the study stops
    assert "the script's output has no 'val loss' (the spec's metric:)" in outcome.reason
    assert "'valid_loss'" in outcome.reason and "steps from 'epoch N'" in outcome.reason
    assert "did you mean 'valid_loss'?" in outcome.reason
    assert "| End of training | test loss" in outcome.reason  # the last lines it printed


# ---------------------------------------------------------------------------- the docs' formats


def formats_table() -> list[tuple[str, str]]:
    """(example line, what the page says it gives) per row of the formats table in docs/your-code.md."""
    page = (ROOT / "docs" / "your-code.md").read_text()
    section = page.split("### What `metrics: auto` reads", 1)[1].split("\n### ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))] if line.startswith("| ") else []
        if len(cells) == 3 and cells[1].startswith("`") and not cells[1].startswith("`--"):
            rows.append((cells[1].strip("`").replace("\\|", "|"), cells[2]))
    return rows


def test_the_docs_list_every_format_with_an_example_line() -> None:
    assert len(formats_table()) >= 10


@pytest.mark.parametrize("example", formats_table(), ids=lambda e: e[0][:30])
def test_every_example_line_on_the_formats_page_parses_as_the_page_says(example: tuple[str, str]) -> None:
    line, says = example
    parsed = read_auto(line.replace("\\t", "\t"))
    expected = dict(re.findall(r"`([^`=\s]+) = ([-\d.e]+)`", says))
    step = re.search(r"step (\d+)", says)
    if says == "nothing":
        assert parsed is None
        return
    assert parsed is not None
    assert parsed.metrics == pytest.approx({k: float(v) for k, v in expected.items()})
    assert parsed.step == (int(step.group(1)) if step else None)
    assert parsed.inside == ("waits" in says)
    assert parsed.final == ("final" in says)


def test_a_metric_printed_without_any_step_says_so(tmp_path: Path) -> None:
    script = tmp_path / "nosteps.py"
    script.write_text("for i in range(3):\n    print(f'val_loss={1 / (i + 1):.3f}')\n")
    entry, _ = parse_mapping({"command": "python nosteps.py"}, tmp_path)
    outcome = run_trial(load_objective(entry or ""), {}, Reporter(trial_dir=tmp_path / "t"), ["val_loss"])
    assert outcome.state == FAILED and outcome.contract
    assert "printed 'val_loss' (the spec's metric:) only on lines without a step" in outcome.reason
    assert "its last lines: val_loss=1.000 | val_loss=0.500 | val_loss=0.333" in outcome.reason


def test_workdir_trial_anchors_the_spec_folder_s_paths(tmp_path: Path) -> None:
    """The script, its config file and data are found from the trial's folder; outputs stay relative."""
    from hpsearch.trial.command import trial_argv

    (tmp_path / "train.py").write_text("")
    (tmp_path / "conf.yaml").write_text("")
    (tmp_path / "data").mkdir()
    (tmp_path / "sgd").mkdir()
    cmd = command({"command": "python train.py --config=conf.yaml data", "workdir": "trial"}, tmp_path)
    argv = trial_argv(cmd, {"root": "./data", "optimizer": "sgd", "out_dir": "out/"}, {})
    assert argv[1:] == [
        f"{tmp_path}/train.py",
        f"--config={tmp_path}/conf.yaml",
        f"{tmp_path}/data",
        f"--root={tmp_path}/data",
        "--optimizer=sgd",
        "--out_dir=out/",
    ]
    assert cmd.workdir_for(tmp_path / "trial-3") == tmp_path / "trial-3" / "work"
