"""Tables for docs/benchmarks/search-quality.md (page.py fills them in) and BENCHMARKS.md's
status row from the search-quality JSONs.

    .venv/bin/python -m bench.quality.render bench/results/search_quality_*.json --summary bench/results/search_quality.json

Each JSON is one run of ``python -m bench.search_quality``; runs of one tier are merged (the
peers' run adds DEHB and SMAC to the main run, seeds 200-699), the live run is Tier C and the run
with ``hpsearch_warm`` is the warm start. Only tables: the words are written by hand on the page.
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


def ert_range(r: dict[str, Any], tasks: list[str], budget: int, method: str = "hpsearch") -> list[float]:
    return [(row(r, t, budget, method) or {}).get("ert_speedup_vs_random") or 0.0 for t in tasks]


def goal(what: str, measured: str, ok: bool) -> str:
    return f"| {what} | {measured} | {'met' if ok else 'not met'} |"


def goals(named: dict[str, dict[str, Any]]) -> str:
    """The goal table of issue #38 (seeds 200-699): each goal met or not, with the number."""
    syn, tab = named["synthetic"], named["table"]
    out = ["| goal | measured | status |", "|---|---|---|"]
    a = {b: pooled_paired(syn, MFH, b) for b in (72, 288)}
    ok = a[72]["win_rate"] >= 0.65 and a[288]["win_rate"] >= 0.60 and max(a[72]["wilcoxon_p"], a[288]["wilcoxon_p"]) < 0.01
    measured = " / ".join(f"{a[b]['win_rate']:.1%} (p {a[b]['wilcoxon_p']:.2g})" for b in (72, 288))
    out.append(
        goal(
            f"paired wins vs Optuna's defaults, 8 mfh pooled ({a[72]['n']} pairs), 72 / 288 epochs: >= 65 % / >= 60 %, p < 0.01",
            measured,
            ok,
        )
    )
    e72, e288 = ert_range(syn, MFH, 72), ert_range(syn, MFH, 288)
    n72, n288 = sum(v >= 3 for v in e72), sum(v >= 5 for v in e288)
    out.append(
        goal(
            "ERT vs random, mfh, 72 / 288 epochs: >= 3x / >= 5x on 6 of 8",
            f"{n72} of 8 ({min(e72):.1f}-{max(e72):.1f}x) / {n288} of 8 ({min(e288):.1f}-{max(e288):.1f}x)",
            n72 >= 6 and n288 >= 6,
        )
    )
    shaped = (row(syn, "shaped", 72, "hpsearch") or {}).get("median_regret", 1.0)
    out.append(goal("`shaped` median regret at 72 epochs: <= 0.035 (SMAC-HB's level)", f"{shaped:.3f}", shaped <= 0.035))
    b = {x: pooled_paired(tab, ["fashion_table"], x) for x in (72, 288)}
    ok = all(b[x]["win_rate"] >= 0.58 and b[x]["wilcoxon_p"] < 0.01 for x in (72, 288))
    measured = " / ".join(f"{b[x]['win_rate']:.1%} (p {b[x]['wilcoxon_p']:.2g})" for x in (72, 288))
    out.append(
        goal(f"paired wins vs Optuna's defaults, Tier B ({b[72]['n']} pairs), 72 / 288 epochs: >= 58 %, p < 0.01, at both", measured, ok)
    )
    tb = ert_range(tab, ["fashion_table"], 72)[0]
    out.append(goal("Tier B ERT vs random at 72 epochs: >= 1.5x", f"{tb:.1f}x", tb >= 1.5))
    losses = [
        f"{what} at {x} ({p['win_rate']:.1%}, p {p['wilcoxon_p']:.2g})"
        for what, pairs in (("Tier A", a), ("Tier B", b))
        for x, p in pairs.items()
        if p["win_rate"] < 0.5 and p["wilcoxon_p"] < 0.05
    ]
    out.append(
        goal(
            "no shipped default loses to Optuna's defaults on Tier B or pooled Tier A at p < 0.05",
            "; ".join(losses) or "no loss (every paired win rate >= 50 % or not significant)",
            not losses,
        )
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
    out["own_wall_s"] = base.get("own_wall_s", base["wall_s"])  # the main run's wall, without the runs merged in
    out["wall_s"] = base["wall_s"] + other["wall_s"]
    return out


def classify(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Name each run: synthetic and table (the main runs, seeds 200-699, peers merged in), live,
    warm, ray, bohb_<tier>, calibration_<tier> (seeds below 200, merged)."""
    named: dict[str, dict[str, Any]] = {}
    runs = [r for r in runs if "tasks" in r and "methods" in r]  # a glob also finds the status summary and other benchmarks
    for r in sorted(runs, key=lambda r: -len(r["methods"])):
        tier = r["tier"] if "tier" in r else "synthetic"
        if r["seeds"][0] < 200:  # the seeds defaults are chosen on: a calibration, not a result
            name = f"calibration_{tier}"
        elif tier == "live":
            name = "live"
        elif "hpsearch_warm" in r["methods"]:
            name = "warm"
        elif "ray_bohb" in r["methods"]:  # Ray's BOHB, one run per tier: kept apart from the ASHA run
            name = f"bohb_{tier}"
        elif any(m.startswith("ray") or m.endswith("_ray") for m in r["methods"]):
            name = "ray"
        else:
            name = tier
        named[name] = merge(named[name], r) if name in named else r
    return named


def peers(named: dict[str, dict[str, Any]]) -> str:
    """Goal: ahead of DEHB and SMAC-HB in median regret at 72 and 288 epochs (the main runs'
    budgets; the peers ran on seeds 200-399, hpsearch on 200-699)."""
    lines = []
    for budget in (72, 288):
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
    ok = h["median_regret"] < o["median_regret"]
    ref = live["tasks"]["fashion_live"]["reference"]
    acc = [value_of(ref, x["median_regret"]) for x in (h, o)]
    return goal(
        f"Tier C live ({n} seeds, {budget} epochs): median ahead of Optuna's defaults",
        f"median best val_acc {acc[0]:.2%} vs {acc[1]:.2%} (regret {h['median_regret']:.3f} vs {o['median_regret']:.3f}); "
        f"hpsearch ahead in {h['win_rate_vs_optuna_default']:.0%} of seeds, p {h['wilcoxon_p']:.2g}",
        ok,
    )


def cost_goal(growth: dict[str, Any]) -> str:
    """The growth bench: hpsearch's sampler time per trial near 1,000 trials, with sampler auto."""
    ms = growth["figures"]["at_950"]["split_ms"]["sampler"]
    return goal("sampler cost per trial at 1,000 trials (`python -m bench.growth`): <= 150 ms with auto", f"{ms:.0f} ms", ms <= 150)


def summary(named: dict[str, dict[str, Any]], goal_lines: list[str]) -> dict[str, Any]:
    """The status row of BENCHMARKS.md (bench/results/search_quality.json, read by bench.run_all)."""
    syn, tab = named["synthetic"], named["table"]
    ert = {b: ert_range(syn, MFH, b) for b in (72, 288)}
    pooled = {b: pooled_paired(syn, MFH, b) for b in (72, 288)}
    pooled_b = {b: pooled_paired(tab, ["fashion_table"], b) for b in (72, 288)}
    headline = (
        f"beats Optuna's defaults in {pooled[72]['win_rate']:.0%} / {pooled[288]['win_rate']:.0%} of {pooled[72]['n']} paired "
        f"Tier A seeds (72 / 288 epochs), Tier B {pooled_b[72]['win_rate']:.0%} / {pooled_b[288]['win_rate']:.0%} of "
        f"{pooled_b[72]['n']}; ERT vs random {min(ert[72]):.1f}-{max(ert[72]):.1f}x at 72 epochs, "
        f"{min(ert[288]):.1f}-{max(ert[288]):.1f}x at 288"
    )
    rows = [line for line in goal_lines if line.startswith("| ") and not line.startswith("| goal")]
    met = [line for line in rows if line.endswith("| met |")]
    return {
        "name": "search_quality",
        "title": "Search quality (Tier A synthetic, Tier B table replay, Tier C live)",
        "headline": headline,
        "command": syn["command"].replace("python ", ".venv/bin/python ", 1).split(" --jobs")[0],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "duration_s": sum(r["wall_s"] for r in named.values()),
        "machine": {"nproc": syn["jobs"], "cpu": syn.get("cpu") or cpu_model(), "gpu": None},
        "smoke": False,
        "goal": "issue #38: >= 65 % / 60 % paired wins on Tier A, >= 58 % on Tier B, ERT >= 3x / 5x, shaped <= 0.035, "
        "Tier C ahead, no default losing",
        "goal_met": len(met) == len(rows),
        "figures": {"tier_a_ert": ert, "paired": pooled, "paired_table": pooled_b, "goals_met": f"{len(met)} of {len(rows)}"},
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
