"""Run the benchmarks, then refresh the generated tables in BENCHMARKS.md from bench/results/*.json.

    .venv/bin/python -m bench.run_all                      # all CPU benchmarks (about 1 h on 2 cores), then render
    .venv/bin/python -m bench.run_all --only orchestration growth
    .venv/bin/python -m bench.run_all --render-only        # the tables from the JSON already there

BENCHMARKS.md is written by hand. This script only replaces what lies between its markers:

    <!-- begin generated: status -->      the goal/status table, one row per benchmark
    <!-- begin generated: table NAME -->  NAME's result table (empty while it has no result)
    <!-- end generated -->

so prose never comes from here. Smoke results (--smoke) are never rendered; a benchmark without a
result reads "not run". The GPU benchmarks exit with a message where CUDA is absent; their failure
does not fail the run. Studies that answered one question and stopped are dated pages under
docs/experiments/, each naming the commit that holds its script.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT

ORDER = (  # the status table's rows and the order run() runs them in
    "search_quality",
    "orchestration",
    "parallel_slots",
    "growth",
    "gpu",
    "gpu_packing",
    "ddp_scaling",
)
GPU = {"gpu", "gpu_packing", "ddp_scaling"}
MAX_ROWS = 8  # longer result tables stay in the JSON: a section of BENCHMARKS.md is about 15 lines
BLOCK = re.compile(r"(<!-- begin generated: (status|table [a-z_]+) -->\n)(.*?)(<!-- end generated -->)", re.S)


def run(names: list[str]) -> list[str]:
    failed = []
    for name in names:
        print(f"== python -m bench.{name}", flush=True)
        proc = subprocess.run([sys.executable, "-m", f"bench.{name}"], cwd=ROOT, check=False)
        if proc.returncode != 0:
            failed.append(name)
    return failed


def load(results: Path) -> dict[str, dict[str, Any]]:
    """Non-smoke results by name; files that are not a bench result (no "name") are skipped."""
    found = {}
    for name in ORDER:
        path = results / f"{name}.json"
        if path.is_file():
            data = json.loads(path.read_text())
            if data.get("name") and not data.get("smoke"):
                found[name] = data
    return found


def status(result: dict[str, Any] | None) -> str:
    if result is None:
        return "not run"
    return {True: "met", False: "**not met**", None: "no target"}[result["goal_met"]]


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(columns: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]


def status_table(found: dict[str, dict[str, Any]]) -> list[str]:
    rows = []
    for name in ORDER:
        r = found.get(name)
        run = f"`{r['command']}`, {machine(r)}, {r['date'][:10]}" if r else f"`.venv/bin/python -m bench.{name}`"
        rows.append([f"[{name}](#{name})", r["goal"] if r else "-", status(r), r["headline"] if r else "-", run])
    return table(["benchmark", "goal", "status", "measured", "last run"], rows)


def machine(r: dict[str, Any]) -> str:
    m = r["machine"]
    gpu = f", {m['gpu']}" if m.get("gpu") else ""
    return f"{m['nproc']} cores ({m['cpu']}){gpu}"


def result_table(name: str, r: dict[str, Any] | None) -> list[str]:
    """The result's own table (a pointer to the JSON where it is long); nothing without a result."""
    if r is None or not r["table"]["columns"]:
        return []
    t = r["table"]
    if len(t["rows"]) <= MAX_ROWS:
        return table(t["columns"], t["rows"])
    return table(["rows", "in"], [[str(len(t["rows"])), f"bench/results/{name}.json, `table`"]])


def render(text: str, results: Path) -> str:
    """`text` with every generated block refreshed; blocks naming an unknown benchmark are left alone."""
    found = load(results)

    def fill(m: re.Match[str]) -> str:
        what = m.group(2)
        if what == "status":
            body = status_table(found)
        elif what.removeprefix("table ") in ORDER:
            name = what.removeprefix("table ")
            body = result_table(name, found.get(name))
        else:
            return m.group(0)
        return m.group(1) + "".join(line + "\n" for line in body) + m.group(4)

    return BLOCK.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--only", nargs="+", choices=ORDER, help="run these benchmarks only")
    p.add_argument("--render-only", action="store_true", help="refresh the tables from existing results")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md", help="the hand-written page whose tables to refresh")
    args = p.parse_args(argv)
    failed: list[str] = []
    if not args.render_only:
        failed = run(list(args.only or [n for n in ORDER if n != "search_quality"]))  # bench.search_quality takes its own arguments
    args.output.write_text(render(args.output.read_text(), args.results))
    print(f"wrote {args.output}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if set(failed) - GPU else 0


if __name__ == "__main__":
    raise SystemExit(main())
