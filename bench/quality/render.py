"""Tables for docs/benchmarks/search-quality.md and BENCHMARKS.md from the search-quality JSONs.

    .venv/bin/python -m bench.quality.render bench/results/search_quality_synthetic.json \
        bench/results/search_quality_table.json bench/results/search_quality_paired.json

Prints Markdown: the goal table (each goal met or not, with the number), then per tier a table
of ERT speed-ups over random search and median regrets. Only tables: the words are written by
hand on the page.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

MFH = [f"mfh{d}_{k}" for d in (3, 6) for k in ("good", "moderate", "bad", "terrible")]


def load(path: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(Path(path).read_text())
    return result


def row(r: dict[str, Any], task: str, budget: int, method: str) -> dict[str, Any] | None:
    try:
        m: dict[str, Any] = r["tasks"][task]["budgets"][str(budget)]["methods"][method]
        return m
    except KeyError:
        return None


def speedups(r: dict[str, Any], tasks: list[str], methods: list[str]) -> str:
    lines = ["| task | budget | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for task in tasks:
        for budget in r["budgets"]:
            cells = []
            for m in methods:
                x = row(r, task, budget, m)
                cells.append("" if x is None else f"{x['ert_speedup_vs_random'] or 0:.1f}x / {x['median_regret']:.3f}")
            lines.append(f"| {task} | {budget} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pooled_paired(r: dict[str, Any], tasks: list[str], budget: int, a: str = "hpsearch", b: str = "optuna_default") -> dict[str, Any]:
    from scipy.stats import wilcoxon

    x = np.concatenate([row(r, t, budget, a)["regrets"] for t in tasks])  # type: ignore[index]
    y = np.concatenate([row(r, t, budget, b)["regrets"] for t in tasks])  # type: ignore[index]
    wins = float(np.mean(x < y) + 0.5 * np.mean(x == y))
    p = float(wilcoxon(x, y, zero_method="zsplit").pvalue) if np.any(x != y) else 1.0
    return {"win_rate": wins, "p": p, "n": len(x)}


def goals(synthetic: dict[str, Any], table: dict[str, Any] | None, paired: dict[str, Any] | None) -> str:
    out = ["| goal | measured | status |", "|---|---|---|"]
    for budget, need in ((72, 2.5), (288, 4.0)):
        got = {t: row(synthetic, t, budget, "hpsearch")["ert_speedup_vs_random"] or 0.0 for t in MFH}  # type: ignore[index]
        n = sum(v >= need for v in got.values())
        tb = row(table, "fashion_table", budget, "hpsearch") if table else None
        tb_text = f"; Tier B {tb['ert_speedup_vs_random'] or 0:.1f}x" if tb else ""
        ok = n >= 6 and (tb is None or (tb["ert_speedup_vs_random"] or 0) >= need)
        out.append(
            f"| ERT speed-up over random >= {need}x at {budget} epochs on >= 6 of 8 mfh tasks and Tier B "
            f"| {n} of 8 (range {min(got.values()):.1f}-{max(got.values()):.1f}x){tb_text} | {'met' if ok else 'not met'} |"
        )
    src = paired or synthetic
    for budget in (72, 288):
        if all(row(src, t, budget, "hpsearch") and "regrets" in row(src, t, budget, "hpsearch") for t in MFH):  # type: ignore[operator]
            p = pooled_paired(src, MFH, budget)
            ok = p["win_rate"] >= 0.6 and p["p"] < 0.01
            out.append(
                f"| beats Optuna's defaults in >= 60 % of paired seeds, p < 0.01, at {budget} epochs (8 mfh tasks pooled) "
                f"| {p['win_rate']:.1%} of {p['n']}, Wilcoxon p {p['p']:.2g} | {'met' if ok else 'not met'} |"
            )
        else:
            rows = [row(src, t, budget, "hpsearch") for t in MFH]
            rates = [r["win_rate_vs_optuna_default"] for r in rows]  # type: ignore[index]
            wins = sum(r["win_rate_vs_optuna_default"] >= 0.6 and r["wilcoxon_p"] < 0.01 for r in rows)  # type: ignore[index]
            out.append(
                f"| beats Optuna's defaults in >= 60 % of paired seeds, p < 0.01, at {budget} epochs "
                f"| per mfh task {min(rates):.0%}-{max(rates):.0%}; {wins} of 8 tasks | {'met' if wins >= 6 else 'not met'} |"
            )
    worse = []
    for t in ("mfh3_terrible", "mfh6_terrible"):
        for budget in synthetic["budgets"]:
            h, rnd = row(synthetic, t, budget, "hpsearch"), row(synthetic, t, budget, "random")
            if h and rnd and h["median_regret"] > rnd["median_regret"]:
                worse.append(f"{t}@{budget}")
    out.append(
        f"| median no worse than random's on the terrible tasks | {'worse at ' + ', '.join(worse) if worse else 'never worse'} "
        f"| {'not met' if worse else 'met'} |"
    )
    return "\n".join(out)


def main(paths: list[str]) -> None:
    runs = [load(p) for p in paths]
    synthetic = next(r for r in runs if r["tier"] == "synthetic" and "sobol" in r["methods"])
    table = next((r for r in runs if r["tier"] == "table"), None)
    paired = next((r for r in runs if r["tier"] == "synthetic" and r is not synthetic), None)
    print(goals(synthetic, table, paired), end="\n\n")
    print(f"Tier A, seeds {synthetic['seeds'][0]}-{synthetic['seeds'][1] - 1}: ERT speed-up over random / median regret\n")
    print(speedups(synthetic, list(synthetic["tasks"]), synthetic["methods"]), end="\n\n")
    if table:
        print(f"Tier B, seeds {table['seeds'][0]}-{table['seeds'][1] - 1}: ERT speed-up over random / median regret\n")
        print(speedups(table, list(table["tasks"]), table["methods"]))


if __name__ == "__main__":
    main(sys.argv[1:])
