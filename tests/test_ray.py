"""The Ray Tune backend on a real Ray cluster started here (2 CPUs, 4 logical GPUs), shared by the tests."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from hpsearch.spec.loader import load_spec
from tests.conftest import ROOT, cli, free_port
from tests.raycluster import RayCluster
from tests.test_reliability import start_run, wait_for

pytestmark = [pytest.mark.ray]

RECORD = ROOT / "tests" / "fixtures" / "record.py"
RESUMABLE = ROOT / "tests" / "fixtures" / "resumable.py"


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """One head node for the module: Ray takes many seconds to start on 2 cores. Stopped after the module,
    its processes only (``ray stop`` would end every Ray here), and checked gone."""
    cluster = RayCluster(free_port(), "--num-gpus=4")
    cluster.start()
    try:
        yield cluster.address
    finally:
        cluster.stop()


def study_trials(spec_path: Path) -> list[optuna.trial.FrozenTrial]:
    spec = load_spec(spec_path, check_objective=False)
    return optuna.load_study(study_name=spec.study, storage=spec.storage_url).get_trials()


@pytest.mark.ray
@pytest.mark.slow
def test_concurrent_ray_trials_get_distinct_gpus(ray_address, tmp_path):
    record = tmp_path / "rec.jsonl"
    spec = tmp_path / "gpus.yaml"
    spec.write_text(f"""
study: gpus
objective: {RECORD}:objective
output: {tmp_path / "runs"}
backend: ray
budget: {{trials: 8}}
ray: {{scheduler: fifo}}
resources: {{gpus_per_trial: 1, cpus_per_trial: 0.5}}
fixed: {{epochs: 2, sleep: 1.0, record: {record}}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
""")
    result = cli("run", str(spec), "--address", ray_address)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "1 GPU per trial" in result.stdout

    runs = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(runs) == 8
    assert {r["devices"] for r in runs} <= {"0", "1", "2", "3"}  # one logical GPU each
    assert "4 at once" in result.stdout  # the plan: 4 fake GPUs, one trial each
    # Whether two trials really ran at the same moment depends on load; when they did, never on one GPU.
    overlapping = [(a, b) for a, b in combinations(runs, 2) if a["start"] < b["end"] and b["start"] < a["end"]]
    assert all(a["devices"] != b["devices"] for a, b in overlapping)
    assert sorted(t.state for t in study_trials(spec)) == [TrialState.COMPLETE] * 8


@pytest.mark.ray
@pytest.mark.slow
def test_a_real_ray_study_prunes_with_asha_and_lands_in_the_optuna_storage(ray_address, tmp_path):
    out = tmp_path / "runs"
    spec = tmp_path / "rayq.yaml"
    spec.write_text(f"""
study: rayq
output: {out}
backend: ray
budget: {{trials: 6}}
sampler: {{name: tpe, seed: 1, startup_trials: 6}}   # random draws, as this test was written: a spread for ASHA to cut
pruner: {{warmup_epochs: 0, reduction_factor: 2, trust: null}}   # ASHA: first rung after epoch 1, keep the better half
ray: {{address: "{ray_address}"}}
resources: {{gpus_per_trial: 0}}
fixed: {{dataset: digits, model: mlp, epochs: 3, batch_size: 64, threads: 1, seed: 0}}
space:
  optimizer:
    choice:
      sgd: {{lr: {{float: [1.0e-4, 0.5], log: true}}}}
      adamw: {{lr: {{float: [1.0e-5, 1.0e-2], log: true}}}}
""")
    result = cli("run", str(spec))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "scheduler asha" in result.stdout and "epoch 1/3" in result.stdout

    trials = study_trials(spec)
    states = [t.state for t in trials]
    assert states.count(TrialState.COMPLETE) + states.count(TrialState.PRUNED) == 6 and len(trials) == 6
    assert TrialState.PRUNED in states and TrialState.COMPLETE in states
    for t in trials:
        assert t.params["optimizer"] in ("sgd", "adamw") and f"optimizer.{t.params['optimizer']}.lr" in t.params
        assert t.user_attrs["config"]["dataset"] == "digits" and t.user_attrs["config"]["lr"] > 0
        assert len(t.user_attrs["history"]) == len(t.intermediate_values) >= 1
        assert (out / "rayq" / f"trial-{t.number}").is_dir()  # TensorBoard, same layout as the Optuna backend
        if t.state == TrialState.PRUNED:
            assert t.user_attrs["reason"] in ("pruned at epoch 1", "pruned at epoch 2")
        else:
            assert t.user_attrs["reason"] == "completed" and t.user_attrs["epochs"] == 3

    exported = tmp_path / "best.yaml"
    result = cli("export", str(spec), "-o", str(exported))
    assert result.returncode == 0, result.stderr
    best = max((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    doc = yaml.safe_load(exported.read_text())
    assert json.dumps(doc).count(str(best.user_attrs["config"]["lr"])) >= 1


@pytest.mark.ray
@pytest.mark.slow
def test_a_misnamed_metric_stops_a_ray_study_at_once(ray_address, tmp_path):
    """As on the Optuna backend: a bug, not bad luck. With max_failures off, Ray would otherwise ask
    for failed trials again, round after round."""
    spec = tmp_path / "raymis.yaml"
    spec.write_text(f"""
study: raymis
objective: "{ROOT / "tests" / "fixtures" / "mistakes.py"}:misnamed"
metric: score
output: {tmp_path / "runs"}
backend: ray
budget: {{trials: 8, max_failures: null}}
ray: {{address: "{ray_address}"}}
resources: {{gpus_per_trial: 0}}
fixed: {{epochs: 3, calls_dir: "{tmp_path}"}}
space:
  lr: {{float: [0.01, 0.1]}}
""")
    result = cli("run", str(spec), "--quiet", timeout=240)
    assert result.returncode == 1, result.stderr + result.stdout
    assert "has no 'score' (the spec's metric:)" in result.stderr and "the objective and the spec disagree on the metric" in result.stderr
    trials = study_trials(spec)
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert failed and any(t.user_attrs.get("contract_error") for t in failed)
    # a trial the stop cut before its first report is "interrupted", its config queued for the run after the fix
    cut = {t.number for t in failed if t.user_attrs["reason"] == "interrupted"}
    assert all(t.state == TrialState.FAIL or t.user_attrs.get("retry_of") in cut for t in trials), [(t.state, t.user_attrs) for t in trials]
    assert len(trials) < 8  # stopped, not asked again until the budget


# ---------------------------------------------------------------------------- without a cluster


def test_pbt_checkpoints_travel_with_their_epoch_whichever_order_the_objective_uses(tmp_path, monkeypatch):
    import torch
    from ray import tune

    from hpsearch.engine.ray.trial import RayReporter

    sent: list[tuple[int, int | None]] = []

    def report(metrics, checkpoint=None):
        state = torch.load(Path(checkpoint.path) / "state.pt") if checkpoint else None
        sent.append((metrics["epoch"], state["epoch"] if state else None))

    monkeypatch.setattr(tune, "report", report)
    reporter = RayReporter(tmp_path / "a", checkpoints=True)
    for epoch in (1, 2):  # report, then save (objectives/image_classification.py)
        reporter.report(epoch, {"val_acc": 0.5})
        reporter.save_checkpoint({"epoch": epoch})
    reporter = RayReporter(tmp_path / "b", checkpoints=True)
    for epoch in (1, 2):  # save, then report
        reporter.save_checkpoint({"epoch": epoch})
        reporter.report(epoch, {"val_acc": 0.5})
    reporter = RayReporter(tmp_path / "c", checkpoints=True)
    reporter.report(1, {"val_acc": 0.5})  # never saves: the epoch still goes out, at the next one or the end
    reporter.report(2, {"val_acc": 0.5})
    reporter.flush()
    assert sent == [(1, 1), (2, 2), (1, 1), (2, 2), (1, None), (2, None)]

    class Restored:
        path = str(tmp_path / "restored")

        def as_directory(self):
            from contextlib import nullcontext

            return nullcontext(self.path)

    Path(Restored.path).mkdir()
    torch.save({"epoch": 4}, Path(Restored.path) / "state.pt")
    monkeypatch.setattr(tune, "get_checkpoint", lambda: Restored())
    assert RayReporter(tmp_path / "d", checkpoints=True).load_checkpoint() == {"epoch": 4}


def test_pbt_perturbs_top_level_parameters_and_keeps_each_trials_optuna_number(tmp_path):
    from types import SimpleNamespace

    from hpsearch.engine.ray.search import build_scheduler
    from hpsearch.engine.ray.trial import KEY

    spec_path = tmp_path / "pbt.yaml"
    spec_path.write_text(f"""
study: pbt
objective: {ROOT / "tests" / "fixtures" / "toy.py"}:objective
backend: ray
ray: {{scheduler: pbt, perturbation_interval: 2}}
fixed: {{epochs: 6}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
  optimizer: {{choice: {{sgd: {{momentum: {{float: [0.8, 0.99]}}}}, adam: null}}}}
""")
    scheduler = build_scheduler(load_spec(spec_path))
    assert set(scheduler._hyperparam_mutations[KEY]["config"]) == {"lr"}  # switching optimizer would need the other branch's values
    trial = SimpleNamespace(config={KEY: {"trial": 7, "config": {"lr": 0.5, "optimizer": "adam"}}})
    best = SimpleNamespace(config={KEY: {"trial": 2, "config": {"lr": 0.01, "optimizer": "sgd", "momentum": 0.9}}})
    config, _ = scheduler._get_new_config(trial, best)
    assert config[KEY]["trial"] == 7
    assert config[KEY]["config"]["optimizer"] == "sgd" and config[KEY]["config"]["momentum"] == 0.9
    assert config[KEY]["config"]["lr"] != 0.01 and best.config[KEY]["trial"] == 2  # perturbed; the source untouched


def test_trial_resources_follow_the_spec_and_the_cluster():
    from hpsearch.engine.ray.cluster import concurrent_trials, trial_resources
    from hpsearch.spec.loader import Spec

    shared = Spec(study="r", resources={"trials_per_gpu": 2, "cpus_per_trial": 0.5})
    assert trial_resources(shared, cluster_gpus=4) == {"cpu": 0.5, "gpu": 0.5}
    assert concurrent_trials(shared, {"cpu": 0.5, "gpu": 0.5}, {"CPU": 2, "GPU": 4}) == 4  # CPUs bind first
    assert trial_resources(Spec(study="r"), cluster_gpus=0) == {"cpu": 1.0, "gpu": 0.0}  # never wait for GPUs that are not there
    assert trial_resources(Spec(study="r", resources={"gpus_per_trial": 0.25}), cluster_gpus=1)["gpu"] == 0.25


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_trial_whose_worker_is_killed_resumes_from_its_checkpoint(ray_address, tmp_path):
    """kill -9 of the Ray worker running a trial mid-way: the trial fails as a dead process, its config is
    retried in the next round and continues from the trial folder's checkpoint (epochs 1-3, then 3-5)."""

    out = tmp_path / "runs"
    spec = tmp_path / "rayk.yaml"
    spec.write_text(f"""
study: rayk
objective: "{RESUMABLE}:user"
output: {out}
backend: ray
budget: {{trials: 2}}
sampler: {{name: random, seed: 0}}
ray: {{address: "{ray_address}", scheduler: fifo}}
resources: {{gpus_per_trial: 0}}
fixed: {{epochs: 5, count: {out}/epochs.log, marker: {out}/hang, hang_at: 3}}
space:
  lr: {{float: [0.01, 0.1], log: true}}
""")
    proc = start_run(spec)
    pid = int(wait_for(lambda: (out / "hang").exists() and (out / "hang").read_text(), 180, proc))
    os.kill(pid, 9)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr + stdout
    trials = study_trials(spec)
    (killed,) = [t for t in trials if t.state == TrialState.FAIL]
    assert killed.user_attrs["reason"] == "failed: process died (its Ray worker exited)"
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == killed.number]
    assert f"trial {retry.number} resumes trial {killed.number} from its epoch 2 checkpoint" in stdout
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["resumed_from"] == {"trial": killed.number, "epoch": 2}
    assert [int(h["epoch"]) for h in retry.user_attrs["history"]] == [1, 2, 3, 4, 5]
    assert sorted(retry.intermediate_values) == [1, 2, 3, 4, 5]
    trained = [line.split() for line in (out / "epochs.log").read_text().splitlines()]
    assert [int(e) for lr, e in trained if float(lr) == killed.params["lr"]] == [1, 2, 3, 3, 4, 5]


def test_an_outcome_reads_back_from_ray_error_text_whatever_the_quoting():
    """Ray's error text may hold the message as a repr: with a ' in the reason, the repr escapes
    the JSON's double quotes (a misnamed metric's reason crashed the driver that way)."""
    from hpsearch.engine.ray.recorder import Recorder
    from hpsearch.engine.ray.trial import ended_text

    ended = {"state": "failed", "reason": "failed: the first report has no 'score' (the spec's metric:)", "contract_error": True}
    for error in (ended_text(ended), repr(RuntimeError(ended_text(ended))), f"Traceback ...\nTrialEnded: {ended_text(ended)!r}\n"):
        assert Recorder.from_error(error) == ended
    broken = Recorder.from_error("TrialEnded: hpsearch-outcome<bm90IGpzb24=>hpsearch-outcome")  # base64 of "not json"
    assert broken is not None and broken["state"] == "failed"  # the generic failure line, not a traceback


@pytest.mark.ray
@pytest.mark.slow
def test_sigterm_of_a_ray_driver_fails_and_queues_its_trials_exit_143(ray_address, tmp_path):
    """A job scheduler's stop, as Ctrl-C (tests/test_ray_kills.py): Ray's core worker puts its own SIGTERM handler
    in place at ray.init (a stack dump, exit 1, the trials left RUNNING); the run's own must win."""
    out = tmp_path / "runs"
    spec = tmp_path / "rayt.yaml"
    spec.write_text(f"""
study: rayt
objective: "{RESUMABLE}:user"
output: {out}
backend: ray
budget: {{trials: 3}}
ray: {{address: "{ray_address}", scheduler: fifo}}
resources: {{gpus_per_trial: 0}}
fixed: {{epochs: 3, count: {out}/epochs.log, marker: {out}/hang, hang_at: 2}}
space:
  lr: {{float: [0.01, 0.1], log: true}}
""")
    proc = start_run(spec)
    wait_for(lambda: (out / "hang").exists() and (out / "hang").read_text(), 180, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "SIGTERM received" not in err
    trials = study_trials(spec)
    cut = [t for t in trials if t.state == TrialState.FAIL]
    assert cut and all(t.user_attrs["reason"] == "interrupted" for t in cut)
    queued = [t for t in trials if t.state == TrialState.WAITING]
    assert sorted(t.user_attrs["retry_of"] for t in queued) == [t.number for t in cut]  # retried first by the next run
    assert not [t for t in trials if t.state == TrialState.RUNNING]


def test_the_trust_gate_turns_a_stop_at_an_untrusted_epoch_into_continue():
    """asha/median on Ray: a STOP at epoch 1, whose values rank the completed trials backwards, is withheld."""
    from ray.tune.schedulers import TrialScheduler

    from hpsearch.engine.ray.search import trust_gate
    from tests.search.test_trust import study_with_curves

    class Stopper:
        def on_trial_result(self, controller, trial, result):
            return TrialScheduler.STOP

    scheduler = Stopper()
    trust_gate(scheduler, study_with_curves(), threshold=0.5, curves=5)
    assert scheduler.on_trial_result(None, None, {"epoch": 1}) == TrialScheduler.CONTINUE  # anti-correlated: not trusted
    assert scheduler.on_trial_result(None, None, {"epoch": 2}) == TrialScheduler.STOP  # ranks: the scheduler decides
