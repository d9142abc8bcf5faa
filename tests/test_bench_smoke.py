"""Every bench script runs in its tiny --smoke mode and writes the JSON that BENCHMARKS.md is built from.

No timing assertions: smoke figures are meaningless by design. The scripts run in this
process (one torch/optuna import for all of them), imported as `python -m bench.x` runs them.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"name", "title", "headline", "command", "date", "duration_s", "machine", "smoke", "goal", "goal_met", "figures", "table", "notes"}
MACHINE_KEYS = {"nproc", "cpu", "torch", "optuna", "ray", "load_avg_1_5_15"}
# script -> figures a reader of BENCHMARKS.md needs from it
FIGURES = {
    "orchestration": {"hpsearch_over_optuna", "hpsearch_ms_per_trial", "optuna_ms_per_trial", "cli_run_1_trial_s"},
    "parallel_slots": {"trials_per_hour_1_slot", "trials_per_hour_2_slots", "speedup"},
    "growth": {"growth_ratio"},
    "gpu": {"combinations", "fastest"},
    "gpu_packing": {"auto_over_1", "medians", "runs"},
}


@pytest.fixture(scope="module")
def bench():
    import torch

    threads = torch.get_num_threads()  # the objective's `threads` key sets it process-wide; later tests get it back
    yield lambda name: importlib.import_module(f"bench.{name}")
    torch.set_num_threads(threads)
    torch.set_flush_denormal(False)  # the objective's flush_denormal sets it on this thread: back to the default


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FIGURES))
def test_smoke_run_writes_its_result(bench, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)  # nothing may land in the working tree
    committed = {p: p.stat().st_mtime_ns for p in (ROOT / "bench" / "results").rglob("*")}
    bench(name).main(["--smoke", "--out", str(tmp_path)])
    assert {p: p.stat().st_mtime_ns for p in (ROOT / "bench" / "results").rglob("*")} == committed
    result = json.loads((tmp_path / f"{name}.json").read_text())
    assert KEYS <= set(result), KEYS - set(result)
    assert MACHINE_KEYS <= set(result["machine"])
    assert result["smoke"] is True and result["name"] == name
    assert result["command"].startswith(f".venv/bin/python -m bench.{name}")  # what BENCHMARKS.md shows beside the figures
    assert FIGURES[name] <= set(result["figures"]), FIGURES[name] - set(result["figures"])
    assert result["table"]["rows"] and all(len(row) == len(result["table"]["columns"]) for row in result["table"]["rows"])
    if "png" in result["figures"]:  # a plot the section links to
        assert (tmp_path / result["figures"]["png"]).stat().st_size > 1000


def test_render_shows_results_and_says_what_has_not_run(bench, tmp_path):
    run_all = bench("run_all")
    fake = {
        "name": "parallel_slots",
        "title": "Parallel slots",
        "headline": "median: 0.31 of the epochs",
        "command": ".venv/bin/python -m bench.parallel_slots",
        "date": "2026-01-01T00:00:00+00:00",
        "duration_s": 12.0,
        "machine": {
            "nproc": 2,
            "cpu": "AMD EPYC",
            "gpu": None,
            "python": "3.11",
            "torch": "2",
            "optuna": "5",
            "ray": "2",
            "load_avg_1_5_15": [1.0, 1.0, 1.0],
        },
        "smoke": False,
        "goal": "≤ 1/3 of the epochs",
        "goal_met": True,
        "figures": {},
        "table": {"columns": ["pruner", "epochs"], "rows": [["median", "93"]]},
        "notes": ["a note"],
    }
    (tmp_path / "parallel_slots.json").write_text(json.dumps(fake))
    (tmp_path / "growth.json").write_text(json.dumps({**fake, "name": "growth", "smoke": True}))  # smoke: never rendered
    out = tmp_path / "BENCHMARKS.md"
    blocks = [
        f"## {n}\n\nBy hand.\n\n<!-- begin generated: table {n} -->\nold\n<!-- end generated -->\n" for n in ("parallel_slots", "growth")
    ]
    out.write_text("# B\n\n<!-- begin generated: status -->\nold\n<!-- end generated -->\n\n" + "\n".join(blocks))
    assert run_all.main(["--render-only", "--results", str(tmp_path), "--output", str(out)]) == 0
    text = out.read_text()
    assert "median: 0.31 of the epochs" in text and "| median | 93 |" in text and "AMD EPYC" in text
    assert (
        "| [gpu](#gpu) | - | not run on a GPU | - | `.venv/bin/python -m bench.gpu` |" in text
        and "old" not in text
        and text.count("By hand.") == 2
    )
    growth = text.split("## growth", 1)[1]
    assert "<!-- begin generated: table growth -->\n<!-- end generated -->" in growth


@pytest.mark.slow
def test_search_quality_smoke_reports_every_figure_per_task_method_and_budget(tmp_path, monkeypatch):
    """python -m bench.search_quality --smoke: 2 tasks x 3 methods x 3 seeds through the real harness."""
    from bench import search_quality

    monkeypatch.chdir(tmp_path)
    search_quality.main(["--smoke", "--out", str(tmp_path), "--jobs", "1"])
    result = json.loads((tmp_path / "search_quality.json").read_text())
    assert set(result["tasks"]) == {"mfh3_good", "shaped"} and result["budgets"] == [12, 24]
    for task in result["tasks"].values():
        for budget in ("12", "24"):
            rows = task["budgets"][budget]["methods"]
            assert set(rows) == {"random", "optuna_default", "hpsearch"}
            hp = rows["hpsearch"]
            assert {"ert_speedup_vs_random", "median_regret", "win_rate_vs_optuna_default", "wilcoxon_p"} <= set(hp)
            assert 0.0 <= hp["win_rate_vs_optuna_default"] <= 1.0 and len(hp["regrets"]) == 3
            assert rows["random"]["ert_speedup_vs_random"] == 1.0  # random against itself


def test_regret_and_expected_running_time_on_hand_made_traces():
    from bench.quality.methods import Trace
    from bench.quality.stats import ert, regret, regret_at

    ref = (1.0, 0.0)  # maximize: optimum 1, median random 0
    assert regret(1.0, ref, "maximize") == 0.0 and regret(0.0, ref, "maximize") == 1.0
    assert regret(2.0, (0.0, 2.0), "minimize") == 1.0
    fast = Trace(spent=[6, 12], incumbent=[0.5, 0.95])
    slow = Trace(spent=[6, 12, 18], incumbent=[0.2, 0.4, 0.5])
    assert regret_at(fast, 11, ref, "maximize") == 0.5 and regret_at(fast, 12, ref, "maximize") == pytest.approx(0.05)
    # target regret 0.5: fast hits at 6, slow at 18 -> (6 + 18) / 2 successes
    assert ert([fast, slow], 0.5, 24, ref, "maximize") == 12.0
    # target 0.1: only fast (12); slow pays its whole budget (24) -> 36 / 1
    assert ert([fast, slow], 0.1, 24, ref, "maximize") == 36.0


@pytest.mark.slow
def test_ray_schedulers_prune_inside_the_budget_and_replay_the_same_search():
    """bench/quality/ray_methods.py: Ray's own ASHA objects stop trials in the shared ask/tell loop."""
    pytest.importorskip("ray.tune")
    from bench.quality.registry import METHODS, make_task

    task = make_task("shaped")
    for name in ("ray_asha", "hpsearch_ray"):
        trace = METHODS[name].run(task, 36, 0)
        assert trace.spent == sorted(trace.spent) and trace.spent[-1] <= 36
        assert trace.pruned_epochs > 0 and trace.trials > 36 // task.max_epochs  # stopped trials bought more trials
        assert trace.incumbent[-1] == trace.incumbent[-1]  # a completed trial: not nan
        assert METHODS[name].run(task, 36, 0).incumbent == trace.incumbent  # same seed, same search
