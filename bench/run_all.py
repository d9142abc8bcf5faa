"""Run every benchmark, then rewrite BENCHMARKS.md from bench/results/*.json.

    .venv/bin/python bench/run_all.py                      # all CPU benchmarks (about 1-1.5 h on 2 cores), then render
    .venv/bin/python bench/run_all.py --only pruning growth
    .venv/bin/python bench/run_all.py --render-only        # BENCHMARKS.md from the JSON already there

bench/gpu.py runs only where CUDA is available (it exits with a message elsewhere); its
section says "not run" until a result file exists. Smoke results (--smoke) never reach
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import RESULTS, ROOT

ORDER = ("objective_vs_textbook", "orchestration", "pruning", "parallel_slots", "growth", "gpu")
TITLES = {"gpu": "GPU training step"}  # headings of benchmarks without a result yet

# What limits each figure, from the profiles and measurements behind it; shown under its section.
ANALYSIS: dict[str, str] = {}


def run(names: list[str]) -> list[str]:
    failed = []
    for name in names:
        print(f"== bench/{name}.py", flush=True)
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / f"{name}.py")], cwd=ROOT)
        if proc.returncode != 0:
            failed.append(name)
    return failed


def load(results: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for name in ORDER:
        path = results / f"{name}.json"
        if path.is_file():
            data = json.loads(path.read_text())
            if not data.get("smoke"):
                found[name] = data
    return found


def status(result: dict[str, Any] | None) -> str:
    if result is None:
        return "not run"
    return {True: "met", False: "**not met**", None: "no target"}[result["goal_met"]]


def machine_line(r: dict[str, Any]) -> str:
    m = r["machine"]
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ", no GPU"
    load = f", load average {m['load_avg_1_5_15'][0]} at the end" if m.get("load_avg_1_5_15") else ""
    return (f"{m['nproc']} cores ({m['cpu']}){gpu}; Python {m['python']}, torch {m['torch']}, optuna {m['optuna']}, "
            f"ray {m['ray']}{load}; {r['date']}, {r['duration_s']:.0f} s")


def table(t: dict[str, Any]) -> list[str]:
    if not t["columns"]:
        return []
    lines = ["| " + " | ".join(t["columns"]) + " |", "|" + "---|" * len(t["columns"])]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in t["rows"]]
    return lines + [""]


def section(name: str, r: dict[str, Any] | None) -> list[str]:
    if r is None:
        title = TITLES.get(name, name)
        lines = [f"## {title}", "", f"Not run yet. Run `.venv/bin/python bench/{name}.py`"]
        if name == "gpu":
            lines[-1] = ("**Not run**: no GPU was available to the session that wrote this file. On a machine with a GPU: "
                         "`.venv/bin/python bench/gpu.py` (about 5-8 minutes; `--compile off` for about 1), then "
                         "`.venv/bin/python bench/run_all.py --render-only`. It imports and passes `--smoke` on CPU "
                         "(tests/test_bench_smoke.py).")
        return lines + [""]
    lines = [f"## {r['title']}", "", f"`{r['command']}`  ", machine_line(r), ""]
    lines += [f"**Goal:** {r['goal']} — {status(r)}. **Measured:** {r['headline']}.", ""]
    lines += table(r["table"])
    lines += [f"- {n}" for n in r["notes"]]
    if name in ANALYSIS:
        lines += ["", ANALYSIS[name].strip()]
    return lines + [""]


def render(results: Path) -> str:
    found = load(results)
    lines = [
        "# Benchmarks",
        "",
        "Every figure here comes from a script in `bench/` (JSON in `bench/results/`, gitignored) and is rewritten",
        "by `.venv/bin/python bench/run_all.py` (`--render-only` to rebuild this file from the JSON alone).",
        "The machine was shared with other jobs while these ran, so absolute times are noisy: the figures are",
        "ratios of variants run side by side in one process or one script, interleaved (A, B, B, A, ...), with medians.",
        "",
        "| benchmark | goal | status | measured |",
        "|---|---|---|---|",
    ]
    for name in ORDER:
        r = found.get(name)
        lines.append(f"| [{name}](#{_anchor(r['title'] if r else TITLES.get(name, name))}) | {r['goal'] if r else '-'} | {status(r)} | "
                     f"{r['headline'] if r else '-'} |")
    lines.append("")
    for name in ORDER:
        lines += section(name, found.get(name))
    return "\n".join(lines).rstrip() + "\n"


def _anchor(title: str) -> str:
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -")
    return keep.replace(" ", "-")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--only", nargs="+", choices=ORDER, help="run these benchmarks only")
    p.add_argument("--render-only", action="store_true", help="rewrite the markdown from existing results")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    args = p.parse_args(argv)
    failed: list[str] = []
    if not args.render_only:
        failed = run(list(args.only or ORDER))
    args.output.write_text(render(args.results))
    print(f"wrote {args.output}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed and failed != ["gpu"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
