"""docs/benchmarks/search-quality.md from bench/quality/page.md: the words are written by hand
there, each ``@@NAME@@`` line is filled from the committed results (bench/results/).

    .venv/bin/python -m bench.quality.page     # rewrite the docs page (tests/test_search_quality_page.py: it is current)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT
from bench.fashion_spec import SEARCH_LIMIT_S, TEST_GOAL
from bench.quality import pooled
from bench.quality import render as R
from hpsearch.spec import defaults

TEMPLATE = Path(__file__).with_name("page.md")
PAGE = ROOT / "docs" / "benchmarks" / "search-quality.md"


def fashion(result: dict[str, Any], seeds: dict[str, Any]) -> str:
    """The spaces/fashion.yaml goal's measured cell and status: the search's wall time and the
    first final run (bench.fashion_spec), the final run's test accuracy on every training seed
    and their mean (bench.fashion_seeds), which the goal is judged on."""
    search, train = result["search_wall_s"], result["train_wall_s"]
    each = " / ".join(f"{r['test_acc']:.2%}" for r in seeds["runs"])
    met = search <= SEARCH_LIMIT_S and seeds["mean_test_acc"] >= TEST_GOAL  # judged on today's goal, whatever the file says
    return (
        f"search {search:.0f} s ({search / 60:.1f} minutes) on 2 idle cores; export ({result['export']}) and train of its best, "
        f"{train:.0f} s (`python -m bench.fashion_spec`): test accuracy {each} on training seeds "
        f"{', '.join(str(r['seed']) for r in seeds['runs'])}, mean {seeds['mean_test_acc']:.2%} (`python -m bench.fashion_seeds`); "
        f"measured {seeds['date']} with {result.get('defaults', 'sampler tpe; pruner hyperband')} "
        f"| {'met' if met else 'not met'}"
    )


def cpu_line(named: dict[str, Any]) -> str:
    """Core-seconds per method of each main run (the harness measures each search's CPU time)."""
    lines = []
    for tier in ("synthetic", "table"):
        r = named[tier]
        if "cpu_s_per_method" in r:
            each = ", ".join(f"{m} {s:,.0f}" for m, s in r["cpu_s_per_method"].items())
            lines.append(
                f"- {tier}: {r.get('own_wall_s', r['wall_s']):,.0f} s wall on {r['jobs']} processes ({r['cpu']}); core-seconds: {each}"
            )
    return "\n".join(lines)


PLOT = PAGE.with_name("search_quality_wins.png")


def wins_plot(named: dict[str, Any], path: Path = PLOT) -> None:
    """Per task and budget, hpsearch's share of paired seeds won against Optuna's defaults, 95 % normal band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(t, named["synthetic"]) for t in named["synthetic"]["tasks"]] + [(t, named["table"]) for t in named["table"]["tasks"]]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for k, budget in enumerate(("72", "288")):
        runs = [r["tasks"][t]["budgets"][budget]["methods"]["hpsearch"] for t, r in rows]
        rates = [x["win_rate_vs_optuna_default"] for x in runs]
        band = [1.96 * (w * (1 - w) / len(x["regrets"])) ** 0.5 for w, x in zip(rates, runs, strict=True)]
        ax.bar([i + (k - 0.5) * 0.38 for i in range(len(rows))], rates, width=0.36, yerr=band, capsize=2, label=f"{budget} epochs")
    ax.axhline(0.5, color="k", lw=0.8)
    ax.set_xticks(range(len(rows)), [t for t, _ in rows], rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="paired seeds won vs Optuna's defaults", ylim=(0.3, 0.9))
    ax.legend(fontsize=8)
    seeds = named["synthetic"]["seeds"]
    ax.set_title(f"hpsearch's defaults against Optuna's, seeds {seeds[0]}-{seeds[1] - 1}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main_runs() -> dict[str, dict[str, Any]]:
    """The committed search-quality runs, named (render.classify)."""
    return R.classify([R.load(str(p)) for p in sorted(RESULTS.glob("search_quality_*.json"))])


def fill(named: dict[str, dict[str, Any]]) -> dict[str, str]:
    syn, tab = named["synthetic"], named["table"]
    cal = {p.name: R.load(str(p)) for p in sorted((RESULTS / "calibration").glob("*.json"))}
    fourth = [cal[name] for name in sorted(cal) if "_attempt4_" in name]
    growth = json.loads((RESULTS / "growth.json").read_text())
    return {
        "@@GOALS@@": "\n".join([R.goals(named), R.peers(named), R.live_goal(named["live"]), R.cost_goal(growth)]),
        "@@CAL4@@": "\n\n".join(f"`{' '.join(r['command'].split()[2:])}`:\n\n{R.wins_table(r)}" for r in fourth),
        "@@DEFAULTS@@": defaults.table(),
        "@@CPU@@": cpu_line(named),
        "@@FASHION@@": fashion(*(json.loads((RESULTS / f"{name}.json").read_text()) for name in ("fashion_spec", "fashion_seeds"))),
        "@@TIER_A@@": R.speedups(syn, list(syn["tasks"]), syn["methods"]),
        "@@TIER_B@@": R.speedups(tab, list(tab["tasks"]), tab["methods"]),
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


def render(named: dict[str, dict[str, Any]] | None = None) -> str:
    text = TEMPLATE.read_text()
    for key, value in fill(named or main_runs()).items():
        text = text.replace(key, value)
    left = [line for line in text.splitlines() if "@@" in line]
    if left:
        raise SystemExit(f"{TEMPLATE}: no value for {left[0]!r}")
    return text


def main() -> None:
    named = main_runs()
    PAGE.write_text(render(named))
    wins_plot(named)
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
