"""Trial slots: device binding, budget exactness with several processes, replacing a killed slot."""

from __future__ import annotations

import json
import socket
from collections import Counter
from itertools import combinations
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from hpsearch.base.cores import cpu_cores
from hpsearch.base.errors import UserError
from hpsearch.cli import main
from hpsearch.engine.devices import plan_slots, threads_notice
from hpsearch.spec.loader import Resources, Spec
from tests.conftest import ROOT, TOY, cli

RECORD = ROOT / "tests" / "fixtures" / "record.py"
GPUS4 = ["0", "1", "2", "3"]


def write_spec(tmp_path: Path, trials: int, resources: str, extra: str = "") -> Path:
    out, record = tmp_path / "runs", tmp_path / "rec.jsonl"
    spec = tmp_path / "slots.yaml"
    spec.write_text(f"""
study: slots
objective: {RECORD}:objective
output: {out}
budget: {{trials: {trials}, max_failures: 3}}
pruner: none
resources: {resources}
fixed: {{epochs: 2, sleep: 0.4, record: {record}{extra}}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
""")
    return spec


def load_trials(out: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name="slots", storage=f"sqlite:///{out}/slots/study.db").get_trials()


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---------------------------------------------------------------------------- planning (no processes)


def test_each_slot_gets_its_own_gpu_and_a_share_of_the_cores():
    slots = plan_slots(Resources(), GPUS4, cores=16)
    assert [s.devices for s in slots] == [("0",), ("1",), ("2",), ("3",)]
    assert {s.threads for s in slots} == {4}
    assert slots[2].env()["CUDA_VISIBLE_DEVICES"] == "2" and slots[2].env()["OMP_NUM_THREADS"] == "4"


def test_trials_per_gpu_2_puts_exactly_two_slots_on_each_device():
    slots = plan_slots(Resources(trials_per_gpu=2), ["0", "1"], cores=8)
    assert Counter(s.devices for s in slots) == {("0",): 2, ("1",): 2}
    assert Counter(s.devices for s in plan_slots(Resources(gpus_per_trial=0.5), ["0", "1"], cores=8)) == {("0",): 2, ("1",): 2}


def test_gpus_picks_devices_and_gpus_per_trial_groups_them():
    assert [s.devices for s in plan_slots(Resources(gpus=[0, 2, 3]), GPUS4, cores=6)] == [("0",), ("2",), ("3",)]
    assert [s.devices for s in plan_slots(Resources(gpus_per_trial=2), GPUS4, cores=4)] == [("0", "1"), ("2", "3")]
    # fewer workers than GPUs: spread over devices before sharing one
    assert [s.devices for s in plan_slots(Resources(workers=2, trials_per_gpu=2), GPUS4, cores=4)] == [("0",), ("1",)]


def test_cpu_slots_split_the_cores_and_hide_gpus_only_when_there_are_some():
    assert [(s.devices, s.threads) for s in plan_slots(Resources(workers=3), [], cores=7)] == [(None, 2)] * 3
    assert plan_slots(Resources(), [], cores=2) == plan_slots(Resources(workers=1), [], cores=2)  # default: one slot
    assert [s.devices for s in plan_slots(Resources(workers=2, gpus_per_trial=0), GPUS4, cores=4)] == [(), ()]


def test_impossible_plans_are_user_errors_naming_the_numbers():
    with pytest.raises(UserError, match=r"resources.workers=8 needs 8 GPU shares.*give 4"):
        plan_slots(Resources(workers=8), GPUS4, cores=4)
    with pytest.raises(UserError, match=r"no GPU 5 on this machine \(4 visible"):
        plan_slots(Resources(gpus=[5]), GPUS4, cores=4)


def test_fixed_threads_above_the_slot_share_is_lowered_in_each_trial_config_and_noticed_once():
    slots = plan_slots(Resources(workers=2), [], cores=2)
    assert threads_notice({"threads": 2}, slots, cores=2) == (
        "fixed.threads=2 would oversubscribe 2 slot(s) on 2 core(s): each trial runs 1 thread (resources.cpus_per_trial sets the share)"
    )
    assert threads_notice({"threads": 1}, slots, cores=2) is None
    assert threads_notice({}, slots, cores=2) is None
    spec = Spec(study="s", fixed={"threads": 4, "epochs": 1})
    spec._threads_cap = slots[0].threads  # what a slot process sets from its HPSEARCH_THREADS
    assert spec.config_for({"lr": 0.1}) == {"threads": 1, "epochs": 1, "lr": 0.1}
    assert spec.fixed["threads"] == 4  # the study's definition keeps what the spec says


def test_run_with_too_many_workers_exits_2_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HPSEARCH_FAKE_GPUS", "2")
    spec = write_spec(tmp_path, 4, "{}")
    assert main(["run", str(spec), "--workers", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "resources.workers=3 needs 3 GPU shares" in err[0]


# ---------------------------------------------------------------------------- real slot processes


@pytest.mark.slow
def test_four_fake_gpus_four_slots_never_share_a_device_and_stop_exactly_at_budget(tmp_path):
    out, record = tmp_path / "runs", tmp_path / "rec.jsonl"
    spec = write_spec(tmp_path, 8, "{}")
    result = cli("run", str(spec), "--workers", "4", env={"HPSEARCH_FAKE_GPUS": "4"})
    assert result.returncode == 0, result.stderr + result.stdout
    assert "[slot " in result.stdout and " trial " in result.stdout  # the slots' epoch lines reach the parent's output

    trials = load_trials(out)
    assert len(trials) == 8 and all(t.state == TrialState.COMPLETE for t in trials)  # no overshoot, no junk trials
    assert sorted(t.number for t in trials) == list(range(8))
    runs = records(record)
    assert len(runs) == 8
    assert {r["devices"] for r in runs} <= set(GPUS4)  # which slots got trials depends on load; each has one GPU
    assert all(r["threads"] == str(max(1, cpu_cores() // 4)) for r in runs)  # the plan: this machine's cores over 4 slots
    device_of = {}
    for r in runs:  # a slot process keeps its device across the trials it runs (it is reused)
        assert device_of.setdefault(r["pid"], r["devices"]) == r["devices"]
    assert len(set(device_of.values())) == len(device_of)  # no two slot processes on one GPU
    # Whether two trials really overlapped depends on load; when they did, never on one device.
    overlapping = [(a, b) for a, b in combinations(runs, 2) if a["start"] < b["end"] and b["start"] < a["end"]]
    assert all(a["devices"] != b["devices"] for a, b in overlapping)


@pytest.mark.slow
def test_a_slot_killed_mid_trial_is_replaced_and_the_budget_is_still_met(tmp_path):
    out, record = tmp_path / "runs", tmp_path / "rec.jsonl"
    spec = write_spec(tmp_path, 6, "{trials_per_gpu: 2}", f", die_once: {tmp_path / 'died'}")
    result = cli("run", str(spec), env={"HPSEARCH_FAKE_GPUS": "1"})
    assert result.returncode == 0, result.stderr + result.stdout
    assert "killed by SIGKILL" in result.stdout and "replaced by pid" in result.stdout

    trials = load_trials(out)
    finished = [t for t in trials if t.state == TrialState.COMPLETE]
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(finished) == 6 and len(failed) == 1 and len(trials) == 7
    # the parent sees its slot die, or the other slot's next claim sees the pid gone first: either tells it
    assert failed[0].user_attrs["reason"] in (
        "failed: slot process killed by SIGKILL (out of memory?)",
        f"failed: process died (pid {failed[0].user_attrs['worker'].rsplit(':', 1)[1]} on {socket.gethostname()} is gone)",
    )
    assert any(t.params == failed[0].params for t in finished)  # its config was queued again and ran
    assert {r["devices"] for r in records(record)} == {"0"}  # two slots share the one device
    # The killed slot's process ran nothing after its death; others (its replacement, the other slot) finished the budget.
    assert failed[0].user_attrs["worker"] not in {t.user_attrs["worker"] for t in finished}


def test_worker_on_a_ray_spec_is_one_line_that_says_what_to_run_and_writes_nothing(tmp_path):
    spec = tmp_path / "ray.yaml"
    spec.write_text(
        f"study: r\nobjective: {TOY}:objective\noutput: {tmp_path / 'runs'}\nbackend: ray\n"
        "space: {lr: {float: [1.0e-4, 1.0], log: true}}\n"
    )
    result = cli("worker", str(spec))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "backend: ray" in lines[0] and f"hpsearch run {spec}" in lines[0] and "--set backend=optuna" in lines[0]
    assert not (tmp_path / "runs").exists()
