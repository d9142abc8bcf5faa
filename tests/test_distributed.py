"""Data-parallel trials and training runs (config ``processes: 2``) on CPU with gloo.

DDP's all-reduce averages the ranks' gradients of their slices of each global batch, so two ranks
with ``batch_size: 16`` train the same weights as one process with ``batch_size: 32``; float sums
run in another order, hence the tolerance (1e-5 absolute, on weights of order 0.1).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import optuna
import pytest
import yaml

from hpsearch.cli import main
from tests.conftest import ROOT

RANKS = ROOT / "tests" / "fixtures" / "ranks.py"
TINY = {
    "dataset": "digits",
    "model": "mlp",
    "mlp_hidden": [32],
    "epochs": 1,
    "seed": 0,
    "threads": 1,
    "lr": 0.05,
    "save_model": True,
}


@pytest.mark.slow
def test_two_processes_train_the_weights_of_one_process_with_the_doubled_batch(tmp_path):
    import torch

    from hpsearch.objectives.image_classification import train
    from hpsearch.trial.ranks import launch
    from hpsearch.trial.reporter import Reporter

    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    threads = torch.get_num_threads()  # the objective's threads: 1 is process-wide; give it back after
    try:
        single = train({**TINY, "batch_size": 32, "accum_steps": 2}, Reporter(trial_dir=one))
    finally:
        torch.set_num_threads(threads)
    # two ranks, 16 samples each per micro-batch, two micro-batches per step (no_sync on the first)
    ddp = launch(
        "hpsearch.objectives.image_classification:train",
        {**TINY, "batch_size": 16, "accum_steps": 2, "processes": 2},
        Reporter(trial_dir=two),
        2,
    )

    a, b = torch.load(one / "model.pt"), torch.load(two / "model.pt")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=1e-5, msg=name)
    assert abs(ddp["val_loss"] - single["val_loss"]) < 1e-5 and ddp["val_acc"] == single["val_acc"]
    assert abs(ddp["train_loss"] - single["train_loss"]) < 1e-5  # summed over both ranks' samples


@pytest.mark.slow
def test_hpsearch_train_processes_2_trains_and_writes_metrics_and_model(tmp_path, capsys):
    config = tmp_path / "best.yaml"
    doc = {
        "objective": "hpsearch.objectives.image_classification:train",
        "metric": "val_acc",
        "config": {**TINY, "epochs": 2, "batch_size": 32},
    }
    config.write_text(yaml.safe_dump(doc))
    run = tmp_path / "run"

    assert main(["train", str(config), "-o", str(run), "--processes", "2"]) == 0
    out = capsys.readouterr().out
    assert "epoch 2/2" in out and "final: val_acc=" in out
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["val_acc"] > 0.8  # digits, mlp, 2 epochs: 0.9+ on one process too
    assert (run / "model.pt").is_file()
    assert [json.loads(line)["epoch"] for line in (run / "history.jsonl").read_text().splitlines()] == [1, 2]
    assert yaml.safe_load((run / "config.yaml").read_text())["config"]["processes"] == 2

    with pytest.raises(SystemExit) as bad:
        main(["train", str(config), "-o", str(tmp_path / "bad"), "--processes", "0"])
    err = capsys.readouterr().err
    assert bad.value.code == 2 and err.strip().count("\n") == 0 and "--processes: must be a positive integer" in err
    assert main(["train", str(config), "-o", str(tmp_path / "bad"), "--devices", "1000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--devices 1000:" in err and "CUDA GPU(s) visible; on CPU use --processes 1000" in err
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_search_trials_run_as_two_ranks_rank_0_stops_all_and_a_crashing_rank_fails_its_trial_leaving_no_process(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    spec = tmp_path / "ranks.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "study": "ranks",
                "objective": f"{RANKS}:objective",
                "output": str(tmp_path / "runs"),
                "metric": "val_acc",
                "budget": {"trials": 3},
                "sampler": {"name": "grid"},
                "pruner": {"name": "none"},
                "fixed": {"processes": 2, "epochs": 2, "pid_dir": str(pids)},
                "space": {"mode": {"choice": ["ok", "crash", "nan"]}},
            }
        )
    )

    main(["run", str(spec), "--quiet"])

    study = optuna.load_study(study_name="ranks", storage=f"sqlite:///{tmp_path / 'runs' / 'ranks' / 'study.db'}")
    by_mode = {t.params["mode"]: t for t in study.get_trials()}
    ok, crashed, diverged = by_mode["ok"], by_mode["crash"], by_mode["nan"]
    # the good trial: both ranks joined, rank 0 alone reported, once per epoch
    assert ok.state.name == "COMPLETE" and ok.user_attrs["metrics"]["world"] == 2.0
    assert sorted(ok.intermediate_values) == [1, 2]
    trial_dir = tmp_path / "runs" / "ranks" / f"trial-{ok.number}"
    assert len(list(trial_dir.glob("events.out.tfevents.*"))) == 1
    assert sorted(p.name for p in pids.glob("*.done")) == ["ok-0.done", "ok-1.done"]  # nan: both ranks stopped at epoch 1
    assert diverged.state.name == "PRUNED" and diverged.user_attrs["reason"].startswith("diverged at epoch 1")
    # the crashed trial: rank 1's error, its traceback in error.txt
    assert crashed.state.name == "FAIL"
    assert "rank 1: ValueError: rank 1 broke on purpose" in crashed.user_attrs["reason"]
    error = (tmp_path / "runs" / "ranks" / f"trial-{crashed.number}" / "error.txt").read_text()
    assert "ranks.py" in error and "broke on purpose" in error
    assert crashed.user_attrs["error_at"].startswith(f"{RANKS}:")  # the line in the objective that raised
    # every rank of the three trials has exited. Both ranks of ok and nan reached the objective (their
    # all-reduce needs both); the crashing trial's rank 0 may be stopped before it gets there when
    # rank 1 raises first (a busy machine: seen once in a fresh clone, 5 pid files of 6)
    started = [int(p.name.split("-")[1]) for p in pids.iterdir() if not p.name.endswith(".done")]
    assert len(started) in (5, 6) and len([p for p in pids.iterdir() if p.name.startswith("1-")]) == 3
    assert [pid for pid in started if _alive(pid)] == []


@pytest.mark.slow
def test_a_rank_ends_without_waiting_on_threads_it_left_running_and_runs_its_atexit_handlers(tmp_path, capfd):
    # ranks end with os._exit, not interpreter finalization: a gloo thread still freeing the last
    # collective's tensors aborted finalization (SIGABRT) about 1 run in 8 on a busy machine
    from hpsearch.trial.ranks import launch
    from hpsearch.trial.reporter import Reporter

    config = {"mode": "linger", "epochs": 1, "pid_dir": str(tmp_path), "processes": 2}
    result = launch(f"{RANKS}:objective", config, Reporter(trial_dir=tmp_path), 2)

    assert result["world"] == 2.0
    assert sorted(p.name for p in tmp_path.glob("atexit-*")) == ["atexit-0", "atexit-1"]
    out = capfd.readouterr().out
    assert "rank 0 says bye" in out and "rank 1 says bye" in out
    started = [int(p.name.split("-")[1]) for p in tmp_path.glob("[01]-*")]
    assert len(started) == 2 and [pid for pid in started if _alive(pid)] == []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z" and os.path.exists(f"/proc/{pid}")


def test_ray_refuses_data_parallel_trials_in_one_line_and_gpus_per_trial_sets_processes(tmp_path, capsys):
    from hpsearch.spec.loader import load_spec

    doc = {
        "study": "r",
        "objective": f"{RANKS}:objective",
        "output": str(tmp_path / "runs"),
        "metric": "val_acc",
        "space": {"epochs": {"int": [1, 3]}},
    }
    spec = tmp_path / "ray.yaml"
    spec.write_text(yaml.safe_dump({**doc, "backend": "ray", "fixed": {"processes": 2}}))
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "backend: ray runs a trial as one process" in err and "TorchTrainer" in err
    assert not (tmp_path / "runs").exists()

    spec.write_text(yaml.safe_dump({**doc, "resources": {"gpus_per_trial": 2}}))
    assert load_spec(spec, check_objective=False).config_for({"epochs": 1})["processes"] == 2
