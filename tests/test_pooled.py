"""bench/quality/pooled.py: pairs methods with a reference by task, budget and seed across runs."""

from __future__ import annotations

from bench.quality import pooled


def run(seeds: tuple[int, int], task: str, methods: dict[str, list[float]]) -> dict:
    rows = {m: {"regrets": r} for m, r in methods.items()}
    return {"seeds": list(seeds), "tasks": {task: {"budgets": {"72": {"methods": rows}}}}}


def test_pairs_across_runs_by_seed_and_first_run_wins():
    a = run((0, 3), "mfh3_good", {"optuna_default": [0.5, 0.5, 0.5], "hpsearch": [0.1, 0.9, 0.1]})
    b = run((2, 4), "mfh3_good", {"optuna_default": [9.0, 0.5], "cand": [0.2, 0.2]})  # seed 2 again: a's value counts
    pairs = pooled.pool([a, b], "optuna_default")
    assert pairs[("8 mfh", 72, "hpsearch")] == ([0.1, 0.9, 0.1], [0.5, 0.5, 0.5])
    assert pairs[("8 mfh", 72, "cand")] == ([0.2, 0.2], [0.5, 0.5])  # seed 2 paired with run a's 0.5, not 9.0
    against_hpsearch = pooled.pool([a, b], "hpsearch")
    assert against_hpsearch[("8 mfh", 72, "cand")] == ([0.2], [0.1])  # only seed 2 has both


def test_groups_and_wide_table():
    runs = [
        run((0, 2), "fashion_table", {"optuna_default": [0.5, 0.5], "hpsearch": [0.1, 0.6]}),
        run((0, 2), "shaped", {"optuna_default": [0.5, 0.5], "hpsearch": [0.1, 0.1]}),
    ]
    assert {g for g, _, _ in pooled.pool(runs, "optuna_default")} == {"Tier B", "shaped"}
    text = pooled.wide(runs)
    assert "| hpsearch | 50% (2) | 100% (2) |" in text
