"""bench/gpu_check.sh --smoke: the GPU check's one command on CPU with a fake GPU, as CI runs it, so
the script a lent GPU machine runs first cannot rot: every step's fields in OUT/gpu_check.json,
nothing measured where CUDA is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from bench.gpu_check import FIELDS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_smoke_writes_every_steps_fields_and_makes_nothing_up(tmp_path):
    committed = {p: p.stat().st_mtime_ns for p in (ROOT / "bench" / "results").rglob("*")}
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--smoke"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in (ROOT / "bench" / "results").rglob("*")} == committed
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "gpu_check_logs.tar.gz", "gpu_packing.json"]
    with tarfile.open(out / "gpu_check_logs.tar.gz") as logs:
        assert sorted(Path(n).name for n in logs.getnames() if n.endswith(".log")) == [f"step{n}.log" for n in range(1, 8)]
    result = json.loads((out / "gpu_check.json").read_text())
    assert result["name"] == "gpu_check" and result["smoke"] is True and result["goal_met"] is None
    assert result["command"] == "bash bench/gpu_check.sh"
    steps = result["figures"]["steps"]
    assert list(steps) == list(FIELDS)
    for name, fields in FIELDS.items():
        assert set(fields) | {"status", "exit", "seconds", "limit_s"} <= set(steps[name]), name
        assert steps[name]["status"] == "ok" or steps[name]["status"].startswith("skipped: no CUDA"), (name, steps[name]["status"])

    mission = steps["mission"]  # the search of spaces/resnet.yaml through the CLI, on a fake GPU
    assert mission["budget_exact"] and mission["finished"] == mission["budget"] == 2
    assert mission["failed"] == 0 and mission["running_left"] == 0 and mission["tensorboard_ok"]
    assert mission["planned_slots_per_gpu"] == 2  # auto re-planned from the first measured peak
    assert all(t["device"].startswith("cpu") and t["amp"] == "float32" and t["peak_mem_mb"] > 0 for t in mission["trials"])
    assert steps["packing"]["trials_per_hour_1"] > 0 and steps["packing"]["trials_per_hour_auto"] > 0
    assert steps["amp"]["grads_equal"] and steps["amp"]["grad_max_rel_diff"] <= steps["amp"]["grad_tolerance"]
    assert steps["amp"]["runs"]["bf16"] == steps["amp"]["runs"]["fp16"] == "skipped: no CUDA"
    assert 0.0 <= steps["export"]["test_acc"] <= 1.0 and steps["export"]["device"].startswith("cpu")
    # no figure where there was no CUDA
    assert all(steps["oom"][k] is None for k in FIELDS["oom"] if k != "batch_size_asked")
    assert all(steps["compile"][k] is None for k in FIELDS["compile"])
    assert steps["gpu"]["mfu_bf16_compiled"] is None
