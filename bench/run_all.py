"""Run the benchmarks, then refresh the generated tables in BENCHMARKS.md from bench/results/*.json.

    .venv/bin/python -m bench.run_all                      # all CPU benchmarks (about 1 h on 2 cores), then render
    .venv/bin/python -m bench.run_all --render-only        # the tables from the JSON already there

BENCHMARKS.md is written by hand; this replaces only what lies between its markers (so prose
never comes from here): ``<!-- begin generated: status -->``, the goal/status table with one row
per benchmark, and ``<!-- begin generated: table NAME -->``, NAME's result table (empty while it
has no result), each up to ``<!-- end generated -->``. Smoke results (--smoke) are never
rendered; a benchmark without a result reads "not run" ("not run on a GPU" for the GPU ones). The
GPU benchmarks exit with a message where CUDA is absent; their failure does not fail the run.
Closed studies are dated pages under docs/experiments/, each naming the commit that holds its script.
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

# the status rows, and the order run() runs them in
ORDER = ("search_quality", "orchestration", "parallel_slots", "growth", "gpu_check", "gpu", "gpu_packing", "ddp_scaling")
GPU = {"gpu_check", "gpu", "gpu_packing", "ddp_scaling"}  # without a result: "not run on a GPU"
MAX_ROWS = 8  # longer result tables stay in the JSON: a section of BENCHMARKS.md is about 15 lines
BLOCK = re.compile(r"(<!-- begin generated: (status|table [a-z_]+) -->\n)(.*?)(<!-- end generated -->)", re.S)


def load(results: Path) -> dict[str, dict[str, Any]]:
    """Non-smoke results by name; files that are not a bench result (no "name") are skipped."""
    found = {name: json.loads(p.read_text()) for name in ORDER if (p := results / f"{name}.json").is_file()}
    return {name: r for name, r in found.items() if r.get("name") and not r.get("smoke")}


def table(columns: list[str], rows: list[list[Any]]) -> list[str]:
    def line(cells: list[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return [line(columns), "|" + "---|" * len(columns), *map(line, rows)]


def status_row(name: str, r: dict[str, Any] | None) -> list[str]:
    if r is None:
        return [f"[{name}](#{name})", "-", "not run on a GPU" if name in GPU else "not run", "-", f"`.venv/bin/python -m bench.{name}`"]
    m = r["machine"]
    where = f"{m['nproc']} cores ({m['cpu']})" + (f", {m['gpu']}" if m.get("gpu") else "")
    status = {True: "met", False: "**not met**", None: "no target"}[r["goal_met"]]
    return [f"[{name}](#{name})", r["goal"], status, r["headline"], f"`{r['command']}`, {where}, {r['date'][:10]}"]


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
        name = m.group(2).removeprefix("table ")
        if m.group(2) == "status":
            body = table(["benchmark", "goal", "status", "measured", "last run"], [status_row(n, found.get(n)) for n in ORDER])
        elif name in ORDER:
            body = result_table(name, found.get(name))
        else:
            return m.group(0)
        return m.group(1) + "".join(line + "\n" for line in body) + m.group(4)

    return BLOCK.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--render-only", action="store_true", help="refresh the tables from existing results")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md", help="the hand-written page whose tables to refresh")
    args = p.parse_args(argv)
    failed: list[str] = []
    for name in [] if args.render_only else [n for n in ORDER if n != "search_quality"]:  # search_quality takes its own arguments
        print(f"== python -m bench.{name}", flush=True)
        failed += [name] if subprocess.run([sys.executable, "-m", f"bench.{name}"], cwd=ROOT, check=False).returncode else []
    args.output.write_text(render(args.output.read_text(), args.results))
    print(f"wrote {args.output}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if set(failed) - GPU else 0


if __name__ == "__main__":
    raise SystemExit(main())
