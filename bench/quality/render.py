"""Tables for docs/benchmarks/search-quality.md (page.py fills them in) and BENCHMARKS.md's
status row from the search-quality JSONs.

    .venv/bin/python -m bench.quality.render bench/results/search_quality_*.json --summary bench/results/search_quality.json

Each JSON is one run of ``python -m bench.search_quality``; runs of one tier over the same seeds
are merged (the peers' run adds DEHB and SMAC to the main run), the 500-seed run of hpsearch
against Optuna's defaults is named ``paired``, the live run is Tier C and the run with
``hpsearch_warm`` is the warm start. Only tables: the words are written by hand on the page.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

from bench.common import cpu_model
from bench.quality import stats
from bench.quality.tasks import MFH


def load(path: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(Path(path).read_text())
    return result


def row(r: dict[str, Any], task: str, budget: int, method: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = r["tasks"].get(task, {}).get("budgets", {}).get(str(budget), {}).get("methods", {}).get(method)
    return found


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


def wins_table(r: dict[str, Any]) -> str:
    """A calibration run: per task and budget, each method's median regret / paired wins against Optuna's defaults."""
    methods = [m for m in r["methods"] if m != "optuna_default"]
    lines = ["| task | budget | optuna_default | " + " | ".join(methods) + " |", "|---|---|---|" + "---|" * len(methods)]
    for task, t in r["tasks"].items():
        for budget, b in t["budgets"].items():
            ms = b["methods"]
            cells = [f"{ms[m]['median_regret']:.3f} / {ms[m]['win_rate_vs_optuna_default']:.0%}" for m in methods]
            lines.append(f"| {task} | {budget} | {ms['optuna_default']['median_regret']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pooled_paired(r: dict[str, Any], tasks: list[str], budget: int) -> dict[str, Any]:
    """hpsearch against Optuna's defaults, seed by seed, over ``tasks`` pooled (stats.paired)."""
    regrets = {m: [x for t in tasks for x in (row(r, t, budget, m) or {})["regrets"]] for m in ("hpsearch", "optuna_default")}
    return stats.paired(regrets["hpsearch"], regrets["optuna_default"])


def goals(named: dict[str, dict[str, Any]]) -> str:
    """The goal table: each goal met or not, with the number (runs named by classify)."""
    synthetic = named["synthetic"]
    out = ["| goal | measured | status |", "|---|---|---|"]
    for budget, need in ((72, 2.5), (288, 4.0)):
        got = {t: row(synthetic, t, budget, "hpsearch")["ert_speedup_vs_random"] or 0.0 for t in MFH}  # type: ignore[index]
        n, tb = sum(v >= need for v in got.values()), row(named["table"], "fashion_table", budget, "hpsearch") or {}
        ok = n >= 6 and (tb["ert_speedup_vs_random"] or 0) >= need
        out.append(
            f"| ERT speed-up over random >= {need}x at {budget} epochs on >= 6 of 8 mfh tasks and Tier B "
            f"| {n} of 8 (range {min(got.values()):.1f}-{max(got.values()):.1f}x); Tier B {tb['ert_speedup_vs_random'] or 0:.1f}x "
            f"| {'met' if ok else 'not met'} |"
        )
    for source, tasks, what in (
        (named["paired_synthetic"], MFH, "8 mfh tasks pooled"),
        (named["paired_table"], ["fashion_table"], "Tier B"),
    ):
        for budget in (72, 288):
            p = pooled_paired(source, tasks, budget)
            ok = p["win_rate"] >= 0.6 and p["wilcoxon_p"] < 0.01
            out.append(
                f"| beats Optuna's defaults in >= 60 % of paired seeds, p < 0.01, at {budget} epochs ({what}) "
                f"| {p['win_rate']:.1%} of {p['n']}, Wilcoxon p {p['wilcoxon_p']:.2g} | {'met' if ok else 'not met'} |"
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


def merge(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``other``'s methods added (same tier and seeds; methods base has win)."""
    out: dict[str, Any] = json.loads(json.dumps(base))
    for task, t in other["tasks"].items():
        for budget, b in t["budgets"].items():
            into = out["tasks"].setdefault(task, t)["budgets"].setdefault(budget, {"targets": b["targets"], "methods": {}})
            for method, m in b["methods"].items():
                into["methods"].setdefault(method, m)
    out["methods"] = list(dict.fromkeys([*base["methods"], *other["methods"]]))
    out["wall_s"] = base["wall_s"] + other["wall_s"]
    return out


def classify(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Name each run: synthetic, table (main runs, peers merged in), paired_synthetic,
    paired_table, live, warm, ray, bohb_<tier>, calibration_<tier> (seeds below 200)."""
    named: dict[str, dict[str, Any]] = {}
    runs = [r for r in runs if "tasks" in r and "methods" in r]  # a glob also finds the status summary and other benchmarks
    for r in sorted(runs, key=lambda r: -len(r["methods"])):
        tier = r["tier"] if "tier" in r else "synthetic"
        seeds = r["seeds"][1] - r["seeds"][0]
        if r["seeds"][0] < 200:  # the seeds defaults are chosen on: a calibration, not a result
            named[f"calibration_{tier}"] = merge(named[f"calibration_{tier}"], r) if f"calibration_{tier}" in named else r
        elif tier == "live":
            named["live"] = r
        elif "hpsearch_warm" in r["methods"]:
            named["warm"] = r
        elif "ray_bohb" in r["methods"]:  # Ray's BOHB, one run per tier: kept apart from the ASHA run
            named[f"bohb_{tier}"] = r
        elif any(m.startswith("ray") or m.endswith("_ray") for m in r["methods"]):
            named["ray"] = r
        elif seeds > 200:
            named[f"paired_{tier}"] = r
        elif tier in named:
            named[tier] = merge(named[tier], r)
        else:
            named[tier] = r
    return named


def peers(named: dict[str, dict[str, Any]]) -> str:
    """Goal: ahead of DEHB and SMAC-HB in median regret at 72 and 144 epochs."""
    lines = []
    for budget in (72, 144):
        ahead, tasks = [], 0
        for tier in ("synthetic", "table"):
            r = named.get(tier)
            for task in MFH + ["fashion_table"] if r else []:
                h, d, s = (row(r, task, budget, m) for m in ("hpsearch", "dehb", "smac_hb"))  # type: ignore[arg-type]
                if h and d and s:
                    tasks += 1
                    ahead += [task] if h["median_regret"] < min(d["median_regret"], s["median_regret"]) else []
        if tasks:
            lines.append(
                f"| ahead of DEHB and SMAC-HB in median regret at {budget} epochs | on {len(ahead)} of {tasks} tasks "
                f"(8 mfh and Tier B) | {'met' if len(ahead) == tasks else 'not met'} |"
            )
    return "\n".join(lines)


def live_goal(live: dict[str, Any]) -> str:
    t = live["tasks"]["fashion_live"]["budgets"]
    budget = max(t, key=int)
    h, o = t[budget]["methods"]["hpsearch"], t[budget]["methods"]["optuna_default"]
    n = live["seeds"][1] - live["seeds"][0]
    ok = h["median_regret"] <= o["median_regret"]
    ref = live["tasks"]["fashion_live"]["reference"]
    acc = [value_of(ref, x["median_regret"]) for x in (h, o)]
    return (
        f"| Tier C: median best >= Optuna's defaults on live Fashion-MNIST ({n} seeds, {budget} epochs) "
        f"| median best val_acc {acc[0]:.2%} vs {acc[1]:.2%} (regret {h['median_regret']:.3f} vs {o['median_regret']:.3f}); "
        f"hpsearch ahead in {h['win_rate_vs_optuna_default']:.0%} "
        f"of seeds, p {h['wilcoxon_p']:.2g} | {'met' if ok else 'not met'} |"
    )


def summary(named: dict[str, dict[str, Any]], goal_lines: list[str]) -> dict[str, Any]:
    """The status row of BENCHMARKS.md (bench/results/search_quality.json, read by bench.run_all)."""
    synthetic, table = named["synthetic"], named.get("table")
    ert = {b: [row(synthetic, t, b, "hpsearch")["ert_speedup_vs_random"] or 0.0 for t in MFH] for b in (72, 288)}  # type: ignore[index]
    opt = {b: [row(synthetic, t, b, "optuna_default")["ert_speedup_vs_random"] or 0.0 for t in MFH] for b in (72, 288)}  # type: ignore[index]
    pooled = {b: pooled_paired(named["paired_synthetic"], MFH, b) for b in (72, 288)}
    pooled_b = {b: pooled_paired(named["paired_table"], ["fashion_table"], b) for b in (72, 288)}
    tier_b = {b: (row(table, "fashion_table", b, "hpsearch") or {}).get("ert_speedup_vs_random") for b in (72, 144, 288)} if table else {}
    headline = (
        f"hpsearch defaults reach random's final median {min(ert[72]):.1f}-{max(ert[72]):.1f}x faster at 72 epochs "
        f"(Optuna's defaults {min(opt[72]):.1f}-{max(opt[72]):.1f}x), {min(ert[288]):.1f}-{max(ert[288]):.1f}x at 288; "
        f"Tier B {min(v or 0 for v in tier_b.values()):.1f}-{max(v or 0 for v in tier_b.values()):.1f}x; beat Optuna's defaults in "
        f"{pooled[72]['win_rate']:.0%} / {pooled[288]['win_rate']:.0%} of {pooled[72]['n']} paired seeds (72 / 288 epochs); "
        f"Tier B {pooled_b[72]['win_rate']:.0%} / {pooled_b[288]['win_rate']:.0%} of {pooled_b[72]['n']}"
    )
    met = [line for line in goal_lines if line.startswith("| ") and line.endswith("| met |")]
    return {
        "name": "search_quality",
        "title": "Search quality (Tier A synthetic, Tier B table replay, Tier C live)",
        "headline": headline,
        "command": synthetic["command"].replace("python ", ".venv/bin/python ", 1).split(" --jobs")[0],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "duration_s": sum(r["wall_s"] for r in named.values()),
        "machine": {"nproc": synthetic["jobs"], "cpu": synthetic.get("cpu") or cpu_model(), "gpu": None},
        "smoke": False,
        "goal": "ERT speed-up >= 2.5x at 72 and >= 4x at 288 epochs on 6 of 8 mfh tasks and Tier B; "
        "beat Optuna's defaults in >= 60 % of paired seeds, p < 0.01",
        "goal_met": len(met) == sum(line.startswith("| ") and not line.startswith("| goal") and "---" not in line for line in goal_lines),
        "figures": {"tier_a_ert": ert, "optuna_ert": opt, "tier_b_ert": tier_b, "paired": pooled},
        "table": {"columns": [], "rows": []},
        "notes": ["tables and words: docs/benchmarks/search-quality.md; runs: " + ", ".join(sorted(named))],
    }


def value_of(ref: dict[str, float], regret: float) -> float:
    """The task's metric value a normalised regret stands for (0: the optimum, 1: random's median)."""
    return ref["optimum"] - regret * (ref["optimum"] - ref["random_median"])


def detail(r: dict[str, Any], task: str, title: str) -> str:
    """One task's rows in full: regret, the value it stands for, ERT in epochs, bad searches, pruning."""
    t = r["tasks"][task]
    ref = t["reference"]
    lines = [
        title,
        "",
        "| budget | method | median regret (95 % band) | median best value | ERT to random's median / p25 (epochs) "
        "| searches worse than random's median | epochs in pruned trials | trials |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for budget, b in t["budgets"].items():
        for m, x in b["methods"].items():
            value = value_of(ref, x["median_regret"])
            ert = " / ".join(
                f"{x[k]:.0f}" if f"{k}" in x and x[k] != float("inf") else "-" for k in ("ert_random_median", "ert_random_p25")
            )
            bad = f"{x['bad_search_share']:.0%}" if "bad_search_share" in x else "-"
            lo, hi = x["median_regret_band"]
            lines.append(
                f"| {budget} | {m} | {x['median_regret']:.3f} ({lo:.3f}-{hi:.3f}) | {value:.4f} | {ert} | {bad} "
                f"| {x['pruned_epoch_share']:.0%} | {x['trials']:.1f} |"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="search-quality JSONs (files without runs in them, the summary too, are skipped)")
    p.add_argument("--summary", type=Path, required=True, help="write BENCHMARKS.md's status row here (bench/results/search_quality.json)")
    args = p.parse_args(argv)
    named = classify([load(path) for path in args.runs])
    lines = (goals(named) + "\n" + peers(named)).splitlines()
    args.summary.write_text(json.dumps(summary(named, lines), indent=1) + "\n")
    print("\n".join(lines))
    print(f"wrote {args.summary}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
