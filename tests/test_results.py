"""best / trials / export on a small toy study: what a user reads, parses and gets as a file."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import optuna
import pytest
import yaml

from hpsearch.cli import main
from hpsearch.reading.export import provenance
from hpsearch.reading.results import print_table

# Three trials in a fixed order: 0 is the best (lr=0.01), 1 fails at epoch 1, 2 completes.
TOY_SPEC = """
study: toy
objective: {toy}:objective
output: {out}
budget: {{trials: 2, max_failures: null}}
pruner: none
sampler: random
fixed: {{epochs: 2}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
  fail_at: {{choice: [0, 1]}}
warm_start:
  - {{lr: 0.01, fail_at: 0}}
  - {{lr: 0.001, fail_at: 1}}
  - {{lr: 0.1, fail_at: 0}}
"""


@pytest.fixture
def toy(write_spec, capsys) -> Path:
    spec = write_spec(TOY_SPEC)
    assert main(["run", str(spec), "--quiet"]) == 0
    capsys.readouterr()
    return spec


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_best_text_and_json(toy, capsys):
    code, out, _ = run(capsys, "best", str(toy))
    assert code == 0
    assert "best val_acc=0.75 (trial 0, 2 epochs" in out  # toy: 1 * (1 - 0.5**2) at lr=0.01
    code, out, _ = run(capsys, "best", str(toy), "--json")
    doc = json.loads(out)
    assert doc["pareto"] is False and doc["metrics"] == ["val_acc"]
    [best] = doc["best"]
    assert best["number"] == 0 and best["values"] == {"val_acc": pytest.approx(0.75)}
    assert best["params"] == {"lr": 0.01, "fail_at": 0} and best["epochs"] == 2
    assert best["config"] == {"epochs": 2, "lr": 0.01, "fail_at": 0}


def test_trials_csv_json_and_plain_table(toy, capsys):
    code, out, _ = run(capsys, "trials", str(toy), "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert out.splitlines()[0] == "number,state,reason,val_acc,lr,fail_at,epochs,wall_s,samples_per_s"
    assert [r["state"] for r in rows] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert rows[1]["reason"] == "failed: RuntimeError: boom at epoch 1" and rows[1]["val_acc"] == ""

    code, out, _ = run(capsys, "trials", str(toy), "--json", "--sort", "value")
    assert [t["number"] for t in json.loads(out)] == [0, 2, 1]  # best first, the failed trial last

    code, out, _ = run(capsys, "trials", str(toy))  # not a TTY: plain aligned text
    lines = out.splitlines()
    assert lines[1].split() == ["number", "state", "reason", "val_acc", "lr", "fail_at", "epochs", "wall_s", "samples_per_s"]
    assert "boom at epoch 1" in lines[3]
    assert len({line.index("COMPLETE") for line in lines[2:] if "COMPLETE" in line}) == 1  # one column


def test_table_on_a_terminal_is_a_rich_table():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    print_table(["number", "val_acc"], [[0, 0.75], [1, None]], title="toy", stream=stream)
    assert "│      1 │       - │" in stream.getvalue()  # box-drawn rows, missing values as "-"


def test_export_writes_a_self_contained_config(toy, tmp_path, capsys):
    out = tmp_path / "best.yaml"
    code, stdout, _ = run(capsys, "export", str(toy), "-o", str(out), "--set", "epochs=7")
    assert code == 0 and f"hpsearch train {out}" in stdout
    text = out.read_text()
    assert text.startswith("# Training config exported by hpsearch: study toy, trial 0 (val_acc=0.75).")
    assert f"hpsearch train {out}" in text.splitlines()[1]
    doc = yaml.safe_load(text)
    assert doc["objective"].endswith("tests/fixtures/toy.py:objective") and Path(doc["objective"].rpartition(":")[0]).is_absolute()
    assert doc["metric"] == ["val_acc"] and doc["direction"] == ["maximize"]
    assert doc["config"] == {"epochs": 7, "lr": 0.01, "fail_at": 0}  # fixed + sampled, epochs overridden
    src = doc["provenance"]
    assert (src["study"], src["trial"], src["values"], src["epochs"]) == ("toy", 0, {"val_acc": pytest.approx(0.75)}, 2)
    assert src["overrides"] == ["epochs=7"] and src["storage"].startswith("sqlite:///")
    assert set(src["versions"]) >= {"hpsearch", "torch", "optuna"} and src["exported"][:2] == "20"


def test_export_of_another_trial(toy, tmp_path, capsys):
    code, _, _ = run(capsys, "export", str(toy), "--trial", "2", "-o", str(tmp_path / "t2.yaml"))
    assert code == 0
    assert yaml.safe_load((tmp_path / "t2.yaml").read_text())["config"]["lr"] == 0.1


def test_provenance_never_holds_the_password():
    trial = optuna.trial.create_trial(value=0.9, params={}, distributions={})
    src = provenance("s", trial, ["val_acc"], "postgresql://user:secret@db.example:5432/hp")
    assert src["storage"] == "postgresql://user:***@db.example:5432/hp"
    assert "secret" not in yaml.safe_dump(src)


@pytest.mark.parametrize(
    ("number", "message"),
    [
        ("1", "error: trial 1 is FAIL (failed: RuntimeError: boom at epoch 1); only completed or pruned trials can be exported"),
        ("9", "error: study 'toy': no trial 9 (trials are 0..2)"),
    ],
)
def test_export_of_a_failed_or_unknown_trial_is_one_line_exit_2(toy, tmp_path, capsys, number, message):
    code, _, err = run(capsys, "export", str(toy), "--trial", number, "-o", str(tmp_path / "x.yaml"))
    assert code == 2 and err.strip() == message
    assert not (tmp_path / "x.yaml").exists()


def test_results_of_a_study_never_run_is_one_line_exit_2(write_spec, capsys):
    spec = write_spec(TOY_SPEC.replace("study: toy", "study: never"))
    code, _, err = run(capsys, "best", str(spec))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no study database" in err


def test_multi_objective_best_lists_the_pareto_front(write_spec, tmp_path, capsys):
    spec = write_spec(TOY_SPEC.replace("study: toy", "study: multi\nmetric: [val_acc, train_loss]\ndirection: [maximize, minimize]"))
    db = f"sqlite:///{tmp_path / 'runs' / 'multi' / 'study.db'}"
    (tmp_path / "runs" / "multi").mkdir(parents=True)
    study = optuna.create_study(storage=db, study_name="multi", directions=["maximize", "minimize"])
    study.set_user_attr("metric_names", ["val_acc", "train_loss"])
    for values in ([0.9, 0.3], [0.8, 0.1], [0.7, 0.4]):  # the third is dominated by both others
        study.add_trial(optuna.trial.create_trial(values=values, params={}, distributions={}, user_attrs={"config": {}}))
    code, out, _ = run(capsys, "best", str(spec), "--json")
    doc = json.loads(out)
    assert doc["pareto"] is True and [t["number"] for t in doc["best"]] == [0, 1]
    assert doc["best"][1]["values"] == {"val_acc": 0.8, "train_loss": 0.1}
    code, out, _ = run(capsys, "best", str(spec))
    assert "2 Pareto-optimal trials" in out
    code, _, err = run(capsys, "export", str(spec), "-o", str(tmp_path / "x.yaml"))
    assert code == 2 and "choose one with --trial N" in err


def test_export_header_promises_checkpoints_only_for_the_builtin_objective(toy, tmp_path, capsys):
    code, _, _ = run(capsys, "export", str(toy), "-o", str(tmp_path / "best.yaml"))
    head = [line for line in (tmp_path / "best.yaml").read_text().splitlines() if line.startswith("#")]
    assert code == 0 and "checkpoints each epoch" not in "\n".join(head) and "the weights" not in "\n".join(head)
    assert "resumes from a checkpoint" in "\n".join(head) and "when the objective saves one (reporter.save_checkpoint)" in "\n".join(head)
    from hpsearch.reading.export import header

    builtin = header({"provenance": {"study": "s", "trial": 0, "full_run": {"save_model": True}}, "output": "runs"}, Path("b.yaml"))
    assert "checkpoints each epoch" in builtin and "the weights" in builtin


def test_an_error_over_several_lines_keeps_the_trials_table_one_row_per_trial(write_spec, capsys):
    shouts = Path(__file__).resolve().parent / "fixtures" / "mistakes.py"
    spec = write_spec(TOY_SPEC.replace("{toy}:objective", f"{shouts}:shouts").replace("study: toy", "study: shouts"))
    assert main(["run", str(spec), "--quiet", "--max-failures", "5"]) == 1  # every trial fails: 5 in a row stop it
    capsys.readouterr()
    code, out, _ = run(capsys, "trials", str(spec))
    lines = out.splitlines()
    assert code == 0 and lines[0] == "shouts: 5 trials" and len(lines) == 2 + 5
    assert all("failed: ValueError: checkpoint is corrupt: expected 12 tensors found 11" in line for line in lines[2:])
    code, out, _ = run(capsys, "trials", str(spec), "--csv")
    assert len(out.splitlines()) == 1 + 5


@pytest.mark.slow
def test_best_and_trials_read_a_study_file_this_user_may_not_write(toy, tmp_path):
    """A copy of the study in a folder and file without write permission; as root, CAP_DAC_OVERRIDE
    (which ignores permissions) is dropped for the command, so root meets the permissions too."""
    import os
    import shutil
    import sqlite3
    import subprocess
    import sys

    src = tmp_path / "runs" / "toy" / "study.db"
    ro = tmp_path / "ro"
    (ro / "runs" / "toy").mkdir(parents=True)
    with sqlite3.connect(src) as a, sqlite3.connect(ro / "runs" / "toy" / "study.db") as b:
        a.backup(b)  # a closed WAL database: no -wal or -shm beside it, as a finished study leaves it
    shutil.copy(toy, ro / "spec.yaml")
    (ro / "spec.yaml").write_text(toy.read_text().replace(f"output: {tmp_path / 'runs'}", "output: runs"))
    (ro / "runs" / "toy" / "study.db").chmod(0o444)
    (ro / "runs" / "toy").chmod(0o555)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"] if os.geteuid() == 0 else []
    try:
        if drop and (shutil.which("setpriv") is None or subprocess.run([*drop, "true"], capture_output=True).returncode != 0):
            pytest.skip("running as root without setpriv: cannot take away root's right to write")
        probe = subprocess.run([*drop, "touch", str(ro / "runs" / "toy" / "probe")], capture_output=True)
        assert probe.returncode != 0, "the folder must not be writable for the test to mean anything"
        for command in (["best"], ["trials", "--csv"]):
            done = subprocess.run(
                [*drop, sys.executable, "-m", "hpsearch.cli", *command, str(ro / "spec.yaml")],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=Path(__file__).resolve().parents[1],
            )
            assert done.returncode == 0, done.stderr
            assert "val_acc=0.75" in done.stdout or "0,COMPLETE,completed,0.75" in done.stdout
        assert sorted(p.name for p in (ro / "runs" / "toy").iterdir()) == ["study.db"]  # nothing created
    finally:
        (ro / "runs" / "toy").chmod(0o755)
