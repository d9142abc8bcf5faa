"""How much of a search's final best is luck: the warm-start benchmark's best configs, re-trained.

bench/warm_start.py scores a warm start per seed by whether it reaches *that seed's* cold start's
final best. That target is the highest of about twelve noisy values (trained configs move with
their training seed), so it carries the cold search's luck as well as its finds. This script takes every seed of a warm-start result (bench/warm_start.py's, in
bench/results/; the committed luck results pooled it with 2 more runs of the same setting, whose
files are in git history: docs/experiments/2026-12-warm-start.md) and
re-trains both best configs, the cold start's and the warm start's, in the search's own setting
(12,000 training images, 6 epochs, the same 5,000 validation images) with `--reseeds` other
training seeds, and once with the search's seed, which must give the recorded value back
(training is deterministic on one CPU model: a check that the configs were read right).

A training seed sets the initial weights and the batch order; the train/validation split and the
subsets have their own seed (split_seed) and stay the same images. Three figures:

- the winner's curse: how far each search's recorded best lies above its config's mean over the
  other seeds;
- how often cold's own best config, trained with another seed, reaches cold's recorded best: the
  rate at which even a warm start that had found the cold start's very config would count as
  reaching it;
- the configs' worth: per seed, the mean over the other seeds of warm's best config minus cold's,
  with a bootstrap 95 % interval of its median over seeds and a sign test.

    .venv/bin/python bench/warm_start_luck.py --jobs 2                       # narrow space: ~4 min per 12 seeds on 2 cores
    .venv/bin/python bench/warm_start_luck.py --result warm_start_wide --jobs 2
    .venv/bin/python bench/warm_start_luck.py --smoke                        # seconds: one seed, tiny subsets
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import random
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from common import RESULTS, EpochCount, parser, pct, write_result

RESEEDS = 4  # other training seeds per config
RESEED_BASE = 5000  # seed s is re-trained with 5000 + 100 * s + k, k = 1..RESEEDS: no search used those
SMOKE = {"train_subset": 256, "val_subset": 200, "epochs": 1}


def val_acc(config: dict[str, Any]) -> float:
    from hpsearch.objectives.image_classification import train

    return float(train(dict(config), EpochCount())["val_acc"])


def training_seeds(row: dict[str, Any], config: dict[str, Any], reseeds: int) -> tuple[int, list[int]]:
    """The search's own training seed of ``config`` (seed ``row["seed"]``'s search) and the other ones it is re-trained with."""
    return int(config.get("seed", row["seed"])), [RESEED_BASE + 100 * row["seed"] + k for k in range(1, reseeds + 1)]


def jobs_for(rows: list[dict[str, Any]], reseeds: int, smoke: bool) -> list[tuple[int, str, int, dict[str, Any]]]:
    """(seed, 'cold' | 'warm', training seed, config) for every training to run; the search's own
    training seed first."""
    out = []
    for r in rows:
        for kind in ("cold", "warm"):
            config = r.get(f"{kind}_best_config")
            if not config:
                continue
            own, others = training_seeds(r, config, reseeds)
            for training_seed in [own, *others]:
                out.append((r["seed"], kind, training_seed, {**config, "seed": training_seed, **(SMOKE if smoke else {})}))
    return out


def bootstrap_median(values: list[float], reps: int = 10000, seed: int = 0) -> tuple[float, float]:
    """A 95 % percentile interval of the median, resampling the seeds."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(reps))
    return meds[int(0.025 * reps)], meds[int(0.975 * reps) - 1]


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value for wins vs losses at 1/2 each (ties left out)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def summarize(rows: list[dict[str, Any]], values: dict[tuple[int, str, int], float], reseeds: int) -> dict[str, Any]:
    per_seed = []
    for r in rows:
        entry: dict[str, Any] = {"seed": r["seed"]}
        for kind in ("cold", "warm"):
            config = r.get(f"{kind}_best_config")
            if not config:
                continue
            own, seeds = training_seeds(r, config, reseeds)
            others = [values[r["seed"], kind, t] for t in seeds]
            entry[kind] = {
                "recorded": r[f"{kind}_final_best"],
                "own_seed": values[r["seed"], kind, own],
                "other_seeds": others,
                "mean": statistics.fmean(others),
                "sd": statistics.stdev(others) if len(others) > 1 else None,
                "batch_size": config.get("batch_size"),
                "optimizer": config.get("optimizer"),
            }
        per_seed.append(entry)
    both = [e for e in per_seed if "cold" in e and "warm" in e]
    diffs = [e["warm"]["mean"] - e["cold"]["mean"] for e in both]
    wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    low, high = bootstrap_median(diffs) if diffs else (math.nan, math.nan)
    cold_reach = [v >= e["cold"]["recorded"] - 1e-12 for e in both for v in e["cold"]["other_seeds"]]
    sds = [e[k]["sd"] for e in per_seed for k in ("cold", "warm") if k in e and e[k]["sd"] is not None]
    reproduced = [abs(e[k]["own_seed"] - e[k]["recorded"]) < 1e-9 for e in per_seed for k in ("cold", "warm") if k in e]
    return {
        "seeds": len(per_seed),
        "reseeds": reseeds,
        "reproduced": sum(reproduced),
        "configs": len(reproduced),
        "curse_cold": statistics.median(e["cold"]["recorded"] - e["cold"]["mean"] for e in both) if both else None,
        "curse_warm": statistics.median(e["warm"]["recorded"] - e["warm"]["mean"] for e in both) if both else None,
        "cold_config_reaches_cold_best": sum(cold_reach) / len(cold_reach) if cold_reach else None,
        "median_sd_over_seeds": statistics.median(sds) if sds else None,
        "spread_of_cold_bests": [min(e["cold"]["recorded"] for e in both), max(e["cold"]["recorded"] for e in both)] if both else None,
        "warm_minus_cold_mean": {
            "median": statistics.median(diffs) if diffs else None,
            "ci95": [low, high],
            "warm_better": wins,
            "cold_better": losses,
            "sign_test_p": sign_test(wins, losses),
        },
        "median_mean_cold": statistics.median(e["cold"]["mean"] for e in both) if both else None,
        "median_mean_warm": statistics.median(e["warm"]["mean"] for e in both) if both else None,
        "per_seed": per_seed,
    }


def pts(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{100 * v:+.2f}"


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--result", default="warm_start", help="the warm-start result to re-train (default warm_start; warm_start_wide)")
    p.add_argument("--reseeds", type=int, default=RESEEDS, help=f"other training seeds per config (default {RESEEDS})")
    p.add_argument("--jobs", type=int, default=1, help="trainings at once, one process each (default 1; each uses one thread)")
    args = p.parse_args(argv)
    started = time.perf_counter()
    result = json.loads((RESULTS / f"{args.result}.json").read_text())
    rows, runs = list(result["figures"]["per_seed"]), [result]
    if args.smoke:
        rows, runs, args.reseeds = rows[:1], runs[:1], 2
    todo = jobs_for(rows, args.reseeds, args.smoke)
    print(f"{len(rows)} seeds, {len(todo)} trainings", flush=True)
    got: list[float] = []
    with contextlib.ExitStack() as stack:
        if args.jobs <= 1:
            results: Iterator[float] = map(val_acc, [c for *_, c in todo])
        else:
            pool = stack.enter_context(ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")))
            results = pool.map(val_acc, [c for *_, c in todo], chunksize=1)
        for v in results:
            got.append(v)
            if len(got) % 20 == 0 or len(got) == len(todo):
                print(f"  {len(got)}/{len(todo)} trainings, {time.perf_counter() - started:.0f} s", flush=True)
    values = {(s, kind, t): v for (s, kind, t, _), v in zip(todo, got, strict=True)}
    if args.smoke:  # tiny subsets: the recorded values are of another setting
        for r in rows:
            for kind in ("cold", "warm"):
                config = r.get(f"{kind}_best_config")
                if config:
                    r[f"{kind}_final_best"] = values[r["seed"], kind, training_seeds(r, config, args.reseeds)[0]]
    f = summarize(rows, values, args.reseeds)
    f["source"] = {"result": args.result, "runs": [v["command"] for v in runs], "spec": result["figures"].get("spec")}
    d = f["warm_minus_cold_mean"]
    headline = (
        f"{f['seeds']} seeds, each best config re-trained with {args.reseeds} other training seeds: a search's recorded best lies "
        f"{pts(f['curse_cold'])} (cold) and {pts(f['curse_warm'])} (warm) points above its config's mean (median over seeds); "
        f"cold's own best config reached cold's recorded best in {100 * (f['cold_config_reaches_cold_best'] or 0):.0f} % of re-trainings; "
        f"warm's best config minus cold's, mean over seeds: median {pts(d['median'])} points (95 % interval {pts(d['ci95'][0])} to "
        f"{pts(d['ci95'][1])}), warm better in {d['warm_better']}, cold in {d['cold_better']} (sign test p = {d['sign_test_p']:.2f})"
    )
    columns = [
        "seed",
        "cold: recorded / own seed / mean of others (sd)",
        "warm: recorded / own seed / mean of others (sd)",
        "warm - cold, mean of others",
        "batch size cold / warm",
    ]
    table_rows = []
    for e in f["per_seed"]:
        c, w = e.get("cold"), e.get("warm")

        def cell(x: dict[str, Any] | None) -> str:
            if x is None:
                return "-"
            sd = "-" if x["sd"] is None else f"{100 * x['sd']:.2f}"
            return f"{pct(x['recorded'])} / {pct(x['own_seed'])} / {pct(x['mean'])} ({sd})"

        table_rows.append(
            [
                e["seed"],
                cell(c),
                cell(w),
                pts(w["mean"] - c["mean"]) if c and w else "-",
                f"{c['batch_size'] if c else '-'} / {w['batch_size'] if w else '-'}",
            ]
        )
    notes = [
        f"Seeds of {len(runs)} run(s) of bench/warm_start.py (the same setting on the same CPU model): "
        + "; ".join(f"`{v['command']}`" for v in runs)
        + ".",
        f"Re-trained with the search's own training seed, {f['reproduced']} of {f['configs']} configs gave their recorded value back "
        "exactly (training is deterministic on one CPU model; a config of another CPU model's run would part after the first steps).",
        "Other training seeds: per seed s, 5000 + 100 s + k, k = 1.."
        f"{args.reseeds}. The training and validation images stay the same (split_seed is its own key); the seed moves the initial "
        "weights and the batch order, which is what two near-equal configs also differ by.",
        f"The spread of one config over training seeds (median sd {pct(f['median_sd_over_seeds'])} points) against the spread of the "
        f"cold starts' recorded bests ({' to '.join(pct(x) for x in f['spread_of_cold_bests'] or [])} %): what a search reports as its best "
        "is its config's worth plus the luckiest of its draws, and per-seed 'reached the cold start's best' compares two such draws.",
        "Bootstrap: 10,000 resamples of the seeds, the percentile interval of the median difference. Sign test: exact binomial, "
        "ties (equal means) left out.",
    ]
    write_result(
        args.out,
        "warm_start_luck" if args.result == "warm_start" else f"{args.result}_luck",
        "How much of a search's best is luck: the warm-start benchmark's best configs re-trained"
        + ("" if args.result == "warm_start" else f" ({args.result})"),
        headline=headline,
        smoke=args.smoke,
        goal="none: a measurement of the warm-start benchmark's per-seed target (what its goal can resolve)",
        goal_met=None,
        figures=f,
        table={"columns": columns, "rows": table_rows},
        notes=notes,
        started=started,
    )


if __name__ == "__main__":
    main()
