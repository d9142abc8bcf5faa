"""Paired wins against Optuna's defaults, pooled over runs: the table the defaults were chosen by.

Each run's JSON holds every method's regret per seed (in its ``--seeds`` order). This pairs each
method with a reference method by (task, budget, seed), across runs (every method but those
with Hyperband repeats seed by seed, and those do since studies are named task-seed), and pools
the pairs into three groups: the 8 mfh tasks, ``shaped`` and Tier B's ``fashion_table``.

    .venv/bin/python -m bench.quality.pooled bench/results/calibration/*.json
    .venv/bin/python -m bench.quality.pooled bench/results/calibration/*.json --reference hpsearch

prints one row per method, one column per group and budget (docs/benchmarks/search-quality.md's
calibration tables).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.quality import stats


def group_of(task: str) -> str:
    return {"fashion_table": "Tier B", "shaped": "shaped"}.get(task, "8 mfh")


def regrets(runs: list[dict[str, Any]]) -> dict[tuple[str, int, str, int], float]:
    """(task, budget, method, seed) -> regret; the first run given wins a key met twice."""
    out: dict[tuple[str, int, str, int], float] = {}
    for run in runs:
        for task, t in run["tasks"].items():
            for budget, b in t["budgets"].items():
                for method, row in b["methods"].items():
                    for seed, value in zip(range(*run["seeds"]), row["regrets"], strict=True):
                        out.setdefault((task, int(budget), method, seed), value)
    return out


def pool(runs: list[dict[str, Any]], reference: str) -> dict[tuple[str, int, str], tuple[list[float], list[float]]]:
    """(group, budget, method) -> (method's regrets, the reference's), paired by task and seed."""
    found = regrets(runs)
    pairs: dict[tuple[str, int, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for (task, budget, method, seed), mine in sorted(found.items()):
        ref = found.get((task, budget, reference, seed))
        if method != reference and ref is not None:
            a, b = pairs[(group_of(task), budget, method)]
            a.append(mine)
            b.append(ref)
    return dict(pairs)


def wide(runs: list[dict[str, Any]], reference: str = "optuna_default") -> str:
    """One row per method, one column per (group, budget): wins (pairs); bold where p < 0.01."""
    cells = {key: stats.paired(*pair) for key, pair in pool(runs, reference).items()}
    columns = sorted({(g, b) for g, b, _ in cells}, key=lambda c: (c[0] != "8 mfh", c[0] != "Tier B", c[1]))
    methods = sorted({m for _, _, m in cells}, key=lambda m: (m != "hpsearch", m))
    lines = [
        "| method | " + " | ".join(f"{g} {b}" for g, b in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for m in methods:
        row = []
        for g, b in columns:
            c = cells.get((g, b, m))
            text = f"{c['win_rate']:.0%} ({c['n']})" if c else "-"
            row.append(f"**{text}**" if c and c["wilcoxon_p"] < 0.01 else text)
        lines.append(f"| {m} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="bench.search_quality JSONs; the first one holding a (task, budget, method, seed) wins")
    p.add_argument("--reference", default="optuna_default", help="the method every other one is paired with")
    args = p.parse_args(argv)
    print(wide([json.loads(Path(path).read_text()) for path in args.runs], args.reference))


if __name__ == "__main__":
    main(sys.argv[1:])
