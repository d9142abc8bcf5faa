"""trials_per_gpu: auto: the packing plan as a pure function, and a run on fake GPUs with a fake memory probe."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess

import optuna
import pytest
from optuna.trial import TrialState

from hpsearch.base.errors import UserError
from hpsearch.cli import main
from hpsearch.engine import devices
from hpsearch.engine.devices import Slot, gpu_memory, in_process, plan_slots
from hpsearch.engine.packing import Packer, Peak, Probe, Size, fits, plan, trial_mb
from hpsearch.engine.slots import Pool, SlotProcess, Watch, packer_for
from hpsearch.spec.loader import Resources, Spec
from hpsearch.study.claim import ClaimLock
from hpsearch.study.progress import Progress
from tests.conftest import ROOT

MEMORY = ROOT / "tests" / "fixtures" / "memory.py"
GPU24 = Probe(24000, 24000)  # MiB


def peak(mb: float, batch: float | None = None, width: float | None = None) -> Peak:
    return Peak(mb, Size(batch, width))


# ---------------------------------------------------------------------------- the pure plan


def test_one_slot_per_gpu_until_a_peak_is_measured():
    assert plan([GPU24, GPU24], []).slots == (1, 1)
    assert plan([GPU24], []).lines(["0"], [GPU24]) == ["GPU 0: 1 slot until a trial reports its peak memory (24,000 MB free)"]


def test_as_many_slots_as_fit_in_free_memory_less_the_margin_and_the_process_overhead():
    # 24,000 MB x 0.85 = 20,400 MB usable; each trial 2,100 MB peak + 500 MB per process -> 7 (7.8 rounded down)
    assert plan([GPU24], [peak(2100)], margin=0.15, cap=8).slots == (7,)
    assert plan([GPU24], [peak(2100)], margin=0.5, cap=8).slots == (4,)  # 12,000 / 2,600
    assert plan([GPU24], [peak(2100)], margin=0.0, cap=16).slots == (9,)  # 24,000 / 2,600
    assert plan([GPU24, Probe(8000, 16000)], [peak(2100)], cap=8).slots == (7, 2)  # each GPU by its own free memory


def test_the_cap_bounds_the_slots_and_the_plan_says_so():
    p = plan([GPU24], [peak(2100)], margin=0.15, cap=4)
    assert p.slots == (4,)
    assert p.lines(["0"], [GPU24]) == ["GPU 0: 4 slots (peak 2,100 MB + 500 MB/process, 15% margin of 24,000 MB free, cap 4)"]
    assert plan([GPU24], [peak(100)], cap=3).slots == (3,)  # small peaks grow the plan up to the cap


def test_an_mlps_width_is_its_widest_hidden_layer():
    from hpsearch.engine.packing import size_of

    assert size_of({"batch_size": 64, "model": "mlp", "mlp_hidden": [512, 128]}) == Size(64, 512)
    assert size_of({"batch_size": 64, "width": 32, "mlp_hidden": [512]}) == Size(64, 32)  # a convnet's width wins
    assert size_of({"batch_size": 64}) == Size(64, None)
    wider = trial_mb([peak(1000, batch=64, width=256)], [size_of({"batch_size": 64, "mlp_hidden": [512]})])
    assert wider == 4000  # twice the width, squared


def test_never_zero_slots_even_when_one_trial_does_not_fit():
    assert plan([GPU24], [peak(30000)]).slots == (1,)
    assert fits(Probe(100, 100), 5000, 0.15) == 1


def test_a_larger_config_raises_the_estimate_by_batch_size_and_width_squared():
    measured = [peak(2000, batch=64, width=16)]
    assert trial_mb(measured) == 2000
    assert trial_mb(measured, [Size(256, 16)]) == 8000  # 4x the batch
    assert trial_mb(measured, [Size(64, 32)]) == 8000  # 2x the width, squared
    assert trial_mb(measured, [Size(32, 8)]) == 2000  # smaller configs never lower it
    assert plan([GPU24], measured, cap=8).slots == (8,)  # 20,400 / 2,500
    larger = plan([GPU24], measured, cap=8, sizes=[Size(256, 16)])
    assert larger.slots == (2,)  # 20,400 / 8,500
    assert (
        larger.line(0, "0", GPU24)
        == "GPU 0: 2 slots (peak 8,000 MB est. from 2,000 MB measured + 500 MB/process, 15% margin of 24,000 MB free)"
    )


def test_workers_bound_the_total_taking_from_the_fullest_gpus():
    assert plan([GPU24, GPU24], [peak(2100)], cap=4, total=5).slots == (3, 2)
    assert plan([GPU24, GPU24], [peak(2100)], cap=4, total=1).slots == (1, 1)  # never below one per GPU in use


def test_bad_margin_and_cap_are_refused():
    with pytest.raises(ValueError, match="margin must be in"):
        plan([GPU24], [], margin=1.0)
    with pytest.raises(ValueError, match="cap must be at least 1"):
        plan([GPU24], [], cap=0)


def test_packer_grows_on_the_first_peak_then_shrinks_after_out_of_memory_and_for_a_larger_config():
    packer = Packer(["0", "1"], [GPU24, GPU24], cap=8)
    assert packer.current is not None and packer.current.slots == (1, 1)
    packer.seen({"batch_size": 64})
    assert packer.update() is None  # nothing measured yet: still one per GPU
    packer.measured(2100.0, {"batch_size": 64})
    assert packer.update() is not None and packer.wanted("0") == 7
    packer.out_of_memory("1", running=5)  # five slots shared GPU 1 when one of them ran out of memory
    assert packer.update() is not None and (packer.wanted("0"), packer.wanted("1")) == (7, 4)
    assert packer.lines()[1].endswith("lowered after out of memory)")
    packer.seen({"batch_size": 128})  # twice the batch: about twice the memory
    assert packer.update() is not None and (packer.wanted("0"), packer.wanted("1")) == (4, 4)
    packer.measured(None, {})  # a trial without a peak (CPU, or an objective that does not report it) changes nothing
    assert packer.update() is None


# ---------------------------------------------------------------------------- probes and slot plans


def test_fake_memory_probe_per_gpu_or_one_for_all(monkeypatch):
    monkeypatch.setenv("HPSEARCH_FAKE_GPU_MEM_MB", "24000,16000")
    assert gpu_memory(["0", "1"]) == {"0": Probe(24000, 24000), "1": Probe(16000, 16000)}
    monkeypatch.setenv("HPSEARCH_FAKE_GPU_MEM_MB", "8000")
    assert gpu_memory(["0", "1"]) == {"0": Probe(8000, 8000), "1": Probe(8000, 8000)}
    monkeypatch.setenv("HPSEARCH_FAKE_GPU_MEM_MB", "24000,16000")
    with pytest.raises(UserError, match="HPSEARCH_FAKE_GPU_MEM_MB='24000,16000': expected free MiB for each GPU"):
        gpu_memory(["0", "1", "2"])


def test_auto_starts_one_slot_per_gpu_in_slot_processes_and_integer_plans_are_unchanged():
    auto = Resources(trials_per_gpu="auto", trials_per_gpu_max=4)
    slots = plan_slots(auto, ["0", "1"], cores=16)
    assert [(s.devices, s.threads) for s in slots] == [(("0",), 2), (("1",), 2)]  # threads: 16 cores over the 8 slots it may reach
    assert not in_process(plan_slots(auto, ["0"], cores=2), auto)  # more slots may come: never in the run process
    assert in_process(plan_slots(auto, [], cores=2), auto)  # no GPU: one slot in process, as trials_per_gpu: 1
    assert [s.devices for s in plan_slots(Resources(trials_per_gpu=2), ["0"], cores=2)] == [("0",), ("0",)]


def test_the_real_probe_maps_the_child_process_bytes_to_mib_by_visible_gpu(monkeypatch):
    """No GPU here: the child's answer (torch.cuda.mem_get_info per device, in bytes) is stubbed."""
    monkeypatch.delenv("HPSEARCH_FAKE_GPUS", raising=False)
    monkeypatch.delenv("HPSEARCH_FAKE_GPU_MEM_MB", raising=False)
    answer = json.dumps([[20 * 2**30, 24 * 2**30], [2**30, 16 * 2**30]])
    monkeypatch.setattr(devices.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=answer + "\n"))
    assert devices.gpu_memory(["2", "3"]) == {"2": Probe(20480, 24576), "3": Probe(1024, 16384)}  # CUDA_VISIBLE_DEVICES=2,3

    def fails(*a, **k):
        raise subprocess.CalledProcessError(1, a)

    monkeypatch.setattr(devices.subprocess, "run", fails)
    assert devices.gpu_memory(["0"]) == {}  # no reading: the run keeps one slot per GPU and says so


def test_without_a_memory_reading_auto_says_so_and_keeps_one_slot_per_gpu(monkeypatch):
    monkeypatch.setenv("HPSEARCH_FAKE_GPUS", "2")
    monkeypatch.delenv("HPSEARCH_FAKE_GPU_MEM_MB", raising=False)
    spec = Spec(study="s", resources={"trials_per_gpu": "auto"})
    packer, note = packer_for(spec, plan_slots(spec.resources, ["0", "1"], cores=2))
    assert packer is None and note == "no memory reading for GPU 0, 1: trials_per_gpu: auto runs one slot per GPU"
    assert packer_for(Spec(study="s", resources={"trials_per_gpu": 2}), plan_slots(Resources(trials_per_gpu=2), ["0"], cores=2)) == (
        None,
        None,
    )


class FakeProc:
    """A slot process that records the signals the parent sends it."""

    def __init__(self, pid: int) -> None:
        self.pid, self.signals = pid, []

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)


def test_the_pool_starts_slots_when_the_plan_grows_and_retires_the_newest_when_it_shrinks():
    spec = Spec(study="s", resources={"trials_per_gpu": "auto"})
    pool = Pool(spec, ["slot"], None)

    def start(slot: Slot, crashes_in_a_row: int = 0) -> None:  # no process: what the parent decides is the point
        entry = SlotProcess(slot, FakeProc(1000 + slot.index))
        pool.live[slot.index], pool.placed[entry.worker] = entry, slot

    pool.start = start
    out = io.StringIO()
    watch = Watch(None, spec, Progress("s", 10, stream=out), pool, set(), ClaimLock(spec.storage_url, "s"), next_index=1)
    start(Slot(0, ("0",), 2))
    assert watch.follow("0", wanted=3, spare=5) == 2 and sorted(pool.live) == [0, 1, 2]
    assert all(e.slot == Slot(e.slot.index, ("0",), 2) for e in pool.live.values())  # same GPU, same thread share
    assert watch.follow("0", wanted=1, spare=5) == 0
    assert [pool.live[i].proc.signals for i in (0, 1, 2)] == [[], [signal.SIGUSR1], [signal.SIGUSR1]]  # finish, then stop
    assert [e.slot.index for e in watch.on_gpu("0")] == [0] and watch.retiring == {1, 2}  # retiring slots are not replaced
    assert watch.follow("0", wanted=3, spare=1) == 1  # no more slots than unclaimed trials
    assert "slot 2 (GPU 0) finishes its trial and stops: the plan has 1 there" in out.getvalue()
    assert "slot 3: GPU 0, 2 threads: started for the plan (pid 1003)" in out.getvalue()


# ---------------------------------------------------------------------------- through the CLI


def write(tmp_path, trials: int, resources: str, fixed: str = "") -> str:
    spec = tmp_path / "pack.yaml"
    spec.write_text(f"""
study: pack
objective: {MEMORY}:objective
output: {tmp_path / "runs"}
budget: {{trials: {trials}, max_failures: 3}}
pruner: none
resources: {resources}
fixed: {{epochs: 1, sleep: 0.2, batch_size: 64, mb_per_sample: 10{fixed}}}
space:
  lr: {{float: [1.0e-4, 1.0], log: true}}
""")
    return str(spec)


def finished(tmp_path) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name="pack", storage=f"sqlite:///{tmp_path}/runs/pack/study.db")
    return [t for t in study.get_trials() if t.state == TrialState.COMPLETE]


def run_on_fake_gpus(monkeypatch, capsys, spec: str, gpus: str) -> str:
    """``hpsearch run SPEC`` in this process (its slots are processes of their own); what it printed."""
    monkeypatch.setenv("HPSEARCH_FAKE_GPUS", gpus)
    monkeypatch.setenv("HPSEARCH_FAKE_GPU_MEM_MB", "24000")
    code = main(["run", spec])
    out, err = capsys.readouterr()
    assert code == 0, err + out
    return out


@pytest.mark.slow
def test_auto_plans_more_than_one_slot_per_fake_gpu_once_a_peak_is_measured(tmp_path, monkeypatch, capsys):
    out = run_on_fake_gpus(monkeypatch, capsys, write(tmp_path, 3, "{trials_per_gpu: auto, trials_per_gpu_max: 2}"), "2")
    assert "plan: GPU 0: 1 slot until a trial reports its peak memory (24,000 MB free)" in out
    # 640 MB peak (10 MB x batch 64) + 500 MB per process fit 17 times in 85% of 24,000 MB: the cap of 2 holds
    for gpu in ("0", "1"):
        assert f"plan: GPU {gpu}: 2 slots (peak 640 MB + 500 MB/process, 15% margin of 24,000 MB free, cap 2)" in out
    assert len(finished(tmp_path)) == 3  # still exactly the budget


@pytest.mark.slow
def test_an_out_of_memory_retry_lowers_the_plan(tmp_path, monkeypatch, capsys):
    spec = write(tmp_path, 3, "{trials_per_gpu: auto, trials_per_gpu_max: 3}", f", oom_on_call: {tmp_path / 'calls'}")
    out = run_on_fake_gpus(monkeypatch, capsys, spec, "1")
    assert re.search(r"plan: GPU 0: [12] slots? \(peak 640 MB .*, lowered after out of memory\)", out), out
    trials = finished(tmp_path)
    assert len(trials) == 3
    retried = [t for t in trials if t.user_attrs.get("oom_retries")]
    assert len(retried) == 1 and retried[0].user_attrs["config"]["batch_size"] == 32  # half the micro-batch


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            "{trials_per_gpu: autoo}",
            "resources.trials_per_gpu: must be a whole number of trials >= 1 or auto, got 'autoo'; did you mean 'auto'?",
        ),
        ("{trials_per_gpu: 0}", "resources.trials_per_gpu: must be a whole number of trials >= 1 or auto, got 0"),
        ("{trials_per_gpu: auto, memory_margin: 1.0}", "resources.memory_margin: Input should be less than 1"),
        ("{trials_per_gpu: auto, memory_margin: -0.1}", "resources.memory_margin: Input should be greater than or equal to 0"),
        ("{trials_per_gpu: auto, gpus_per_trial: 2}", "auto packs one-GPU trials by memory; it needs gpus_per_trial: 1"),
        ("{trials_per_gpu: auto, gpus_per_trial: 0.5}", "set either trials_per_gpu or gpus_per_trial"),
    ],
)
def test_bad_packing_settings_are_one_line_and_exit_2(tmp_path, capsys, resources, message):
    assert main(["run", write(tmp_path, 2, resources)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "pack.yaml" in err[0], err
    assert not (tmp_path / "runs").exists()  # nothing written


def test_ray_refuses_auto_in_one_line(tmp_path, capsys):
    assert main(["validate", write(tmp_path, 2, "{trials_per_gpu: auto}"), "--set", "backend=ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "resources.trials_per_gpu: auto packs the optuna backend's slots" in err[0], err


def test_a_bad_fake_memory_probe_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HPSEARCH_FAKE_GPUS", "2")
    monkeypatch.setenv("HPSEARCH_FAKE_GPU_MEM_MB", "lots")
    assert main(["run", write(tmp_path, 2, "{trials_per_gpu: auto}")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "HPSEARCH_FAKE_GPU_MEM_MB='lots'" in err[0], err
    assert not (tmp_path / "runs" / "pack" / "study.db").exists()
