"""Cheap settings as predictors: how well does a study on less data or fewer epochs rank configs for the full setting?

A warm start (bench/warm_start.py) transfers what a cheap study ranked high; it can only help
as far as that ranking holds in the full setting. This measures it directly, without a
search in between: `--configs` configs drawn at random from bench/spaces/bench_fashion.yaml, each
trained in the full setting (12,000 images, 6 epochs, 5,000 validation images) and in each
cheap setting (fewer images and epochs, 1,000 validation images), same training seed.

Per cheap setting: Spearman's rank correlation with the full setting's val_acc over all
configs and over the full setting's better half (where a search spends its time, and where
the cheap setting must still tell configs apart); the full val_acc of the cheap setting's top
1 and best of its top 3 against the true best; the cost per trial, in images and in seconds.

    .venv/bin/python bench/fidelity.py --jobs 2     # 40 configs, ~4 min on 2 cores
    .venv/bin/python bench/fidelity.py --smoke
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from common import BENCH_SPEC as SPEC
from common import ROOT, EpochCount, Timer, parser, random_configs, write_result

FULL = {"train_subset": 12000, "val_subset": 5000, "epochs": 6}
CHEAP = {  # name -> setting; 1500x2 is bench/warm_start.py's first default source
    "1500x2": {"train_subset": 1500, "val_subset": 1000, "epochs": 2},
    "3000x2": {"train_subset": 3000, "val_subset": 1000, "epochs": 2},
    "1500x4": {"train_subset": 1500, "val_subset": 1000, "epochs": 4},
    "6000x1": {"train_subset": 6000, "val_subset": 1000, "epochs": 1},
    "12000x1": {"train_subset": 12000, "val_subset": 1000, "epochs": 1},
}
TRAIN_SEED = 7


def measure(job: tuple[int, dict[str, Any], dict[str, dict[str, Any]]]) -> dict[str, Any]:
    from hpsearch.objectives.image_classification import train

    i, config, settings = job
    row: dict[str, Any] = {"i": i, "config": config}
    for name, setting in settings.items():
        reporter = EpochCount()
        with Timer() as t:
            train({**config, **setting}, reporter)
        row[name] = {"val_acc": reporter.val_acc[-1] if reporter.val_acc else float("nan"), "s": t.s}
    print(f"  config {i}: " + ", ".join(f"{k} {row[k]['val_acc']:.4f}" for k in settings), flush=True)
    return row


def spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic) if len(a) > 2 else float("nan")


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--configs", type=int, default=40)
    p.add_argument("--seed", type=int, default=123, help="the random sampler's seed (which configs)")
    p.add_argument("--jobs", type=int, default=1, help="configs trained at once, one process each (one thread each)")
    args = p.parse_args(argv)
    started = time.perf_counter()
    full, cheap = dict(FULL), dict(CHEAP)
    if args.smoke:
        args.configs = 4
        full = {"train_subset": 600, "val_subset": 200, "epochs": 2}  # the space's batches go up to 256
        cheap = {k: {**v, "train_subset": 300, "val_subset": 100} for k, v in list(CHEAP.items())[:2]}
    settings = {"full": full, **cheap}
    jobs = [(i, {**c, "seed": TRAIN_SEED}, settings) for i, c in enumerate(random_configs(SPEC, args.configs, args.seed))]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(measure, jobs))
    else:
        rows = [measure(job) for job in jobs]
    truth = [r["full"]["val_acc"] for r in rows]
    best = max(truth)
    better = [i for i, v in enumerate(truth) if v >= statistics.median(truth)]
    full_images = full["train_subset"] * full["epochs"]
    figures: dict[str, Any] = {"configs": args.configs, "seed": args.seed, "full": full, "true_best": best, "settings": {}}
    table = []
    for name, setting in cheap.items():
        got = [r[name]["val_acc"] for r in rows]
        order = sorted(range(len(rows)), key=lambda i: -got[i])
        f = {
            "setting": setting,
            "spearman": spearman(truth, got),
            "spearman_better_half": spearman([truth[i] for i in better], [got[i] for i in better]),
            "full_of_top1": truth[order[0]],
            "full_best_of_top3": max(truth[i] for i in order[:3]),
            "cost_images": setting["train_subset"] * setting["epochs"] / full_images,
            "cost_s": sum(r[name]["s"] for r in rows) / sum(r["full"]["s"] for r in rows),
        }
        figures["settings"][name] = f
        table.append(
            [
                f"{setting['train_subset']} images x {setting['epochs']} epochs",
                f"{f['spearman']:.2f}",
                f"{f['spearman_better_half']:.2f}",
                f"{100 * f['full_of_top1']:.2f}",
                f"{100 * f['full_best_of_top3']:.2f}",
                f"{f['cost_images']:.3f} / {f['cost_s']:.3f}",
            ]
        )
    figures["per_config"] = rows
    ranked = sorted(figures["settings"].items(), key=lambda kv: -kv[1]["spearman_better_half"])
    first = figures["settings"].get("1500x2")
    notes = [
        f"{args.configs} configs drawn by Optuna's RandomSampler(seed={args.seed}) from {SPEC.relative_to(ROOT)}, training seed "
        f"{TRAIN_SEED} in every setting; the full setting is the spec's ({full['train_subset']} images, {full['epochs']} epochs, "
        f"{full['val_subset']} validation images), each cheap one validates on 1,000 images (a standard error of ~1.3 points "
        "near 80 %: part of what a cheap setting gets wrong is its own noise). One thread per training, "
        f"{args.jobs} at a time. Cost per trial: training images relative to the full setting's, and measured seconds (each "
        "training pays for building its model and data too, so cheap settings cost more than their images say).",
        f"Best at ranking the better half: {ranked[0][0]} (Spearman {ranked[0][1]['spearman_better_half']:.2f})"
        + (
            f"; bench/warm_start.py's first source, 1500x2, comes {[k for k, _ in ranked].index('1500x2') + 1} of "
            f"{len(ranked)} at {first['spearman_better_half']:.2f}, and its top config scored {100 * first['full_of_top1']:.2f} % "
            f"in the full setting against the true best {100 * best:.2f} %."
            if first and not args.smoke
            else "."
        ),
    ]
    write_result(
        args.out,
        "fidelity",
        "Cheap settings as predictors of the full setting (Fashion-MNIST)",
        headline=f"rank correlation with the full setting among its better half of {args.configs} random configs: "
        + ", ".join(f"{k} {v['spearman_better_half']:.2f}" for k, v in figures["settings"].items()),
        smoke=args.smoke,
        goal="none: a measurement that picks the warm start's source setting",
        goal_met=None,
        figures=figures,
        table={
            "columns": [
                "cheap setting",
                "Spearman, all",
                "Spearman, better half",
                "full val % of its top 1",
                "best full val % of its top 3",
                "cost per trial: images / seconds",
            ],
            "rows": table,
        },
        notes=notes,
        started=started,
    )


if __name__ == "__main__":
    main()
