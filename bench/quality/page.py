"""docs/benchmarks/search-quality.md from bench/quality/page.md: the words are written by hand
there, each ``@@NAME@@`` line is filled from the committed results (bench/results/).

    .venv/bin/python -m bench.quality.page     # rewrite the docs page (tests/test_search_quality_page.py: it is current)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT
from bench.fashion_spec import SEARCH_LIMIT_S
from bench.quality import pooled
from bench.quality import render as R

TEMPLATE = Path(__file__).with_name("page.md")
PAGE = ROOT / "docs" / "benchmarks" / "search-quality.md"


def fashion(result: dict[str, Any], seeds: dict[str, Any]) -> str:
    """The spaces/fashion.yaml goal's measured cell and status: the search's wall time and the
    first final run (bench.fashion_spec), the final run's test accuracy on every training seed
    and their mean (bench.fashion_seeds), which the goal is judged on."""
    search, train = result["search_wall_s"], result["train_wall_s"]
    each = " / ".join(f"{r['test_acc']:.2%}" for r in seeds["runs"])
    met = search <= SEARCH_LIMIT_S and seeds["goal_met"]
    return (
        f"search {search:.0f} s ({search / 60:.1f} minutes) on 2 idle cores; export ({result['export']}) and train of its best, "
        f"{train:.0f} s (`python -m bench.fashion_spec`): test accuracy {each} on training seeds "
        f"{', '.join(str(r['seed']) for r in seeds['runs'])}, mean {seeds['mean_test_acc']:.2%} (`python -m bench.fashion_seeds`) "
        f"| {'met' if met else 'not met'}"
    )


def fill() -> dict[str, str]:
    named = R.classify([R.load(str(p)) for p in sorted(RESULTS.glob("search_quality_*.json"))])
    syn, tab = named["synthetic"], named["table"]
    cal = {p.name: R.load(str(p)) for p in sorted((RESULTS / "calibration").glob("*.json"))}
    second = {tier: cal[f"{tier}_attempt2_s0-{last}.json"] for tier, last in (("synthetic", 39), ("table", 99))}
    wins = "Calibration (seeds {}), median regret / paired wins against Optuna's defaults:\n\n{}"
    return {
        "@@GOALS@@": "\n".join([R.goals(named), R.peers(named), R.live_goal(named["live"])]),
        "@@FASHION@@": fashion(*(json.loads((RESULTS / f"{name}.json").read_text()) for name in ("fashion_spec", "fashion_seeds"))),
        "@@TIER_A@@": R.speedups(syn, list(syn["tasks"]), syn["methods"]) + "\n\n" + wins.format("0-39", R.wins_table(second["synthetic"])),
        "@@TIER_B@@": R.speedups(tab, list(tab["tasks"]), tab["methods"]) + "\n\n" + wins.format("0-99", R.wins_table(second["table"])),
        "@@TIER_C@@": R.detail(
            named["live"],
            "fashion_live",
            "Seeds 200-211, 72 epochs; the value is the val_acc of the search's best completed trial (5,000 validation images):",
        ),
        "@@WARM@@": R.detail(
            named["warm"], "fashion_table", "Seeds 200-399; `hpsearch_warm`'s 96 epochs are its 24-epoch source plus 72 warm-started ones:"
        ),
        "@@CAL3_OPTUNA@@": pooled.wide(list(cal.values())),
        "@@CAL3_HPSEARCH@@": pooled.wide(list(cal.values()), "hpsearch"),
    }


def render() -> str:
    text = TEMPLATE.read_text()
    for key, value in fill().items():
        text = text.replace(key, value)
    left = [line for line in text.splitlines() if "@@" in line]
    if left:
        raise SystemExit(f"{TEMPLATE}: no value for {left[0]!r}")
    return text


def main() -> None:
    PAGE.write_text(render())
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
