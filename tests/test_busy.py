"""A machine shared with other jobs: OpenMP threads sleep while they wait (OMP_WAIT_POLICY=PASSIVE)
in every process hpsearch starts, unless the user chose a policy, and a spec's ``fixed.threads``
never gives a slot more threads than its share of the cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpsearch.base.cores import cpu_cores
from tests.conftest import cli

RECORDER = """
import json, os


def fit(config, reporter):
    reporter.report(1, {"score": config["x"]})
    line = {"pid": os.getpid(), "wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "omp_threads": os.environ.get("OMP_NUM_THREADS"), "threads": config.get("threads")}
    with open(config["record"], "a") as f:
        f.write(json.dumps(line) + "\\n")
    return {"score": config["x"]}
"""


def study(tmp_path: Path, threads: int | None = None) -> tuple[Path, Path]:
    (tmp_path / "recorder.py").write_text(RECORDER)
    record = tmp_path / "record.jsonl"
    fixed = f"record: {record}" + (f", threads: {threads}" if threads is not None else "")
    spec = tmp_path / "busy.yaml"
    spec.write_text(
        f"study: busy\nobjective: recorder.py:fit\nmetric: score\noutput: runs\nbudget: {{trials: 4}}\npruner: none\n"
        f"fixed: {{{fixed}}}\nspace:\n  x: {{float: [0.0, 1.0]}}\n"
    )
    return spec, record


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["in_process", "two_slots"])
def test_trials_run_with_passive_openmp_waits_by_default(tmp_path: Path, workers: list[str], monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)  # as a user starts it (hpsearch.cli.main in this process sets it)
    spec, record = study(tmp_path)
    result = cli("run", "busy.yaml", "--quiet", *workers, cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    runs = records(record)
    assert len(runs) == 4
    assert {r["wait_policy"] for r in runs} == {"PASSIVE"}
    # The run process itself, or up to 2 slot processes (how many got a trial depends on load).
    assert 1 <= len({r["pid"] for r in runs}) <= (2 if workers else 1)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["in_process", "two_slots"])
def test_a_wait_policy_the_user_chose_is_kept(tmp_path: Path, workers: list[str]):
    spec, record = study(tmp_path)
    result = cli("run", "busy.yaml", "--quiet", *workers, cwd=tmp_path, env={"OMP_WAIT_POLICY": "ACTIVE"})
    assert result.returncode == 0, result.stderr + result.stdout
    assert {r["wait_policy"] for r in records(record)} == {"ACTIVE"}


@pytest.mark.slow
def test_fixed_threads_above_a_slots_share_is_capped_with_one_notice(tmp_path: Path):
    """The issue: quickstart said threads: 2, and --workers 2 ran 4 threads on 2 cores."""
    share = max(1, cpu_cores() // 2)
    spec, record = study(tmp_path, threads=share * 2 + 2)
    result = cli("run", "busy.yaml", "--workers", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    notices = [line for line in result.stdout.splitlines() if "would oversubscribe" in line]
    assert len(notices) == 1, result.stdout
    assert (
        f"fixed.threads={share * 2 + 2} would oversubscribe 2 slot(s) on {cpu_cores()} core(s): each trial runs {share} thread"
        in notices[0]
    )
    runs = records(record)
    assert len(runs) == 4
    assert {r["threads"] for r in runs} == {share}  # the config the objective received
    assert {r["omp_threads"] for r in runs} == {str(share)}


def test_fixed_threads_above_this_machines_cores_is_capped_in_process_too(tmp_path: Path):
    spec, record = study(tmp_path, threads=cpu_cores() + 2)
    result = cli("run", "busy.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    assert f"fixed.threads={cpu_cores() + 2} would oversubscribe 1 slot(s) on {cpu_cores()} core(s)" in result.stdout
    assert {r["threads"] for r in records(record)} == {cpu_cores()}


@pytest.mark.slow
def test_fixed_threads_within_the_share_is_left_alone(tmp_path: Path):
    spec, record = study(tmp_path, threads=1)
    result = cli("run", "busy.yaml", "--workers", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "oversubscribe" not in result.stdout
    assert {r["threads"] for r in records(record)} == {1}
