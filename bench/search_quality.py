"""Search quality: does a method find a better model with less compute? One harness, every method.

Each method runs as an ask/tell loop with the same budget in epochs (fidelity units; one full
trial is 6 epochs) on every task of a tier, for many seeds, and is scored on the true value of
its incumbent (the best completed trial by its observed value). See bench/quality/.

  --tier synthetic   Tier A: mf-prior-bench's mfh3/mfh6 x good/moderate/bad/terrible and `shaped`
                     (a closed-form space shaped like a training space); seconds per search
  --tier table       Tier B: a surrogate of 1,176 trained Fashion-MNIST runs
                     (bench/results/tier_b/, python -m bench.tier_b_table), replayed with the measured
                     seed-to-seed noise
  --tier live        Tier C: the Tier B space trained live on Fashion-MNIST (bench/quality/live.py)

Tasks and methods are named in bench/quality/registry.py.

    .venv/bin/python -m bench.search_quality --tier synthetic --seeds 200:700 --budget 72 288 --json bench/results/search_quality_synthetic.json
    .venv/bin/python -m bench.search_quality --tier table --methods random optuna_default hpsearch --seeds 200:300 --budget 72
    .venv/bin/python -m bench.search_quality --smoke --out /tmp      # seconds
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, cpu_model, started_as
from bench.quality import harness
from bench.quality.registry import TIERS, available


def seeds_arg(text: str) -> range:
    a, _, b = text.partition(":")
    return range(int(a), int(b))


def plot(traces: dict[Any, Any], tasks: list[str], methods: list[str], budget: int, seeds: range, budgets: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(tasks))
    rows = (len(tasks) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, task in zip(axes.flat, tasks, strict=False):
        for method in methods:
            a = harness.anytime(traces, task, method, budget, seeds, budgets)
            ax.plot(a["epochs"], a["median"], label=method, lw=1.6 if method == "hpsearch" else 1.0)
            ax.fill_between(a["epochs"], a["low"], a["high"], alpha=0.15)
        ax.set_title(task, fontsize=10)
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_xlabel("epochs spent")
        ax.set_ylabel("median normalised regret")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    sep = "\n" if cols < 3 else " "  # one panel: the title on two lines, or it is cut
    fig.suptitle(
        f"any-time median regret, 95 % bootstrap band, {len(seeds)} seeds{sep}(0 = optimum, 1 = median random config)", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


QUICK = ["mfh3_bad", "mfh6_moderate", "fashion_table"]  # calibration seeds only: the report seeds stay unseen


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tier", choices=list(TIERS), default="synthetic")
    p.add_argument("--methods", nargs="+", default=None, help="default: every method of bench/quality/registry.py installed here")
    p.add_argument("--seeds", type=seeds_arg, default=range(200, 400), help="A:B, half-open (0-199 chose the defaults)")
    p.add_argument("--budget", type=int, nargs="+", default=[72, 288], help="epochs (6 per full trial): 12 and 48 full trials")
    p.add_argument("--json", type=Path, help="write the summary here")
    p.add_argument("--plot", type=Path, help="PNG of the any-time regret at the largest budget")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--tasks", nargs="+", help="these tasks (any tier's) instead of the tier's")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"the edit-measure loop: {', '.join(QUICK)}, seeds 0:40, 72 epochs, random, optuna_default, hpsearch",
    )
    p.add_argument("--smoke", action="store_true", help="2 tasks, 3 methods, 3 seeds, budget 24 (seconds)")
    p.add_argument("--out", type=Path, help="with --smoke: folder for search_quality.json")
    args = p.parse_args(argv)
    tasks = args.tasks or TIERS[args.tier]
    if args.quick:
        tasks, args.seeds, args.budget = QUICK, range(0, 40), [72]
    found = available()
    methods = args.methods or (["random", "optuna_default", "hpsearch"] if args.quick else list(found))
    if args.smoke:
        tasks, methods, args.seeds, args.budget = ["mfh3_good", "shaped"], ["random", "optuna_default", "hpsearch"], range(3), [12, 24]
        args.json = args.json or (args.out or RESULTS) / "search_quality.json"
    unknown = [m for m in methods if m not in found]
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; the methods here are {', '.join(found)}")
    t0 = time.perf_counter()
    print(f"{len(tasks)} tasks x {len(methods)} methods x {len(args.seeds)} seeds, budgets {args.budget}, {args.jobs} jobs", flush=True)
    traces = harness.run(tasks, methods, sorted(args.budget), args.seeds, args.jobs)
    summary = harness.summarise(traces, tasks, methods, sorted(args.budget), args.seeds)
    wall = time.perf_counter() - t0
    for task, s in summary.items():
        for budget, b in s["budgets"].items():
            line = "  ".join(
                f"{m} {r['median_regret']:.3f}/{(r.get('ert_speedup_vs_random') or 0):.1f}x"
                + (f"/w{r['win_rate_vs_optuna_default']:.2f}" if "win_rate_vs_optuna_default" in r else "")
                for m, r in b["methods"].items()
            )
            print(f"{task:18s} {budget:>4s}: {line}")
    result = {"command": started_as("bench.search_quality", argv), "tier": args.tier}
    result |= {"seeds": [args.seeds.start, args.seeds.stop], "budgets": sorted(args.budget), "methods": methods, "wall_s": round(wall, 1)}
    cpu_s = {m: round(sum(t.cpu_s for key, t in traces.items() if key[1] == m), 1) for m in methods}  # every search once
    result |= {"jobs": args.jobs, "cpu": cpu_model(), "cpu_s_per_method": cpu_s, "tasks": summary}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json} ({wall:.0f} s)")
    if args.plot:
        plot(traces, tasks, methods, max(args.budget), args.seeds, sorted(args.budget), args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
