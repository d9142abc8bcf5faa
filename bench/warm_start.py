"""Warm start on Fashion-MNIST: does a cheap earlier study make the full study reach its best sooner?

Per seed, three searches with hpsearch's defaults (TPE + median pruner) on bench/spaces/bench_fashion.yaml:

    source  the cheap setting: 3,000 training images (of the spec's 12,000), 1,000 validation
            images, 2 epochs per trial, `--source-budget` epochs in all
    cold    the full setting (12,000 images, 6 epochs per trial), `--budget` epochs, from nothing
    warm    the same full setting and budget, with `warm_start: {study: <source>, top: K}`: the
            source's completed trials are imported (they inform TPE, on this study's scale; they
            do not count toward the budget); with K > 0 its best K configs are re-run first

Compute is counted two ways. In full-setting epochs, the source by its training images (a source
epoch trains on 3,000 images, a full one on 12,000: 0.25). In seconds, as measured: each search's
time from its first trial's start to the completion of the trial that reached the target, the
source's whole run added to the warm start's. Seconds see what epochs hide: an epoch at batch size
32 costs several at 256, and each trial pays for building its model and data.

Target: the cold search's final best val_acc (per seed). Ratio = warm cost to reach it / cold
cost to reach it. The goal (issue 13): the warm start reaches the same best with less compute
(ratio < 1, in epochs and in seconds). Each search's best config is retrained on the full
54,000-image train split (common.retrain) and scored on the 10,000 test images.

The source setting was chosen by measuring, not by searching: bench/fidelity.py trains 40 random
configs in the full setting and in five cheap ones; of those at about a tenth of a full trial's
seconds, 3,000 images x 2 epochs ranked the full setting's better half best (Spearman 0.79;
12,000 x 1 did better, 0.84, at a sixth; the first default, 1,500 x 2, 0.53, and its top config
was not the best). With a source that ranks well, its best configs are worth re-running first
(top 2). The first defaults (1,500 images, top 0: chosen among five variants on seeds 0-3)
ran on the same seeds; docs/experiments/2026-12-warm-start.md has the runs and what they showed:

    .venv/bin/python bench/warm_start.py --seeds 12 --first-seed 4 --jobs 2   # ~2.5 CPU-min per seed
    .venv/bin/python bench/warm_start.py --spec bench/spaces/bench_fashion_wide.yaml --seeds 12 --first-seed 4 --jobs 2
    .venv/bin/python bench/warm_start.py --smoke    # seconds: tiny subsets, 1-epoch trials

Besides the per-seed ratio, the expected running time (ERT, as in COCO/BBOB) to targets common to
all seeds: the cold starts' median final best, and half a point below it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import multiprocessing
import statistics
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import BENCH_SPEC as SPEC
from common import ROOT, WITHIN, Setup, Timer, Trial, curve, epochs_to, parser, pct, retrain, setup_for, spec_overrides, write_result

SOURCE_TRAIN, FULL_TRAIN = 3000, 12000  # training images per epoch: the cost of an epoch in each setting
SOURCE_VAL = 1000
SOURCE_EPOCHS = 2  # epochs per source trial
TOP = 2  # configs of the source re-evaluated first (with the 1,500-image source, seeds 0-3 did better with 0: its top ranked poorly)
SOURCE_SEED = 1000  # the source study of seed s uses sampler and training seed 1000 + s


@dataclass
class Search:
    trials: list[Trial]  # own trials in order of completion, cut at the budget
    spent: int  # epochs of those trials
    wall_s: float
    ran: int = 0  # epochs run, trials past the budget cut included (what wall_s paid for)
    at_s: list[float] = field(default_factory=list)  # per trial in ``trials``: seconds since the search's first trial started
    imported: int = 0
    skipped: int = 0
    best_config: dict[str, Any] | None = None
    test_acc: float | None = None
    until: int | None = None  # warm_start.until in force: own trials after which the imported ones stop informing TPE

    def last_s(self, default: float) -> float:
        """Seconds from the search's first trial start to its last counted trial's completion."""
        return max((x for x in self.at_s if math.isfinite(x)), default=default)


def source_setup(smoke: bool, budget: int, train: int = SOURCE_TRAIN, val: int = SOURCE_VAL, epochs: int = SOURCE_EPOCHS) -> Setup:
    if smoke:
        return Setup(2, 1, {"train_subset": 128, "val_subset": 100, "test_subset": 100, "epochs": 1}, {}, 0)
    return Setup(budget, epochs, {"train_subset": train, "val_subset": val, "epochs": epochs}, {}, 0)


def search(setup: Setup, seed: int, folder: Path, extra: list[str], spec_path: Path, cut: bool = True) -> Search:
    """``cut``: count trials only up to the budget (a source study is counted whole: all of it is imported)."""
    # hpsearch's trial loop in this process, stopped on the epoch budget (as search_quality_live.hpsearch_search)
    from hpsearch.engine.optuna import work
    from hpsearch.spec.loader import load_spec

    spec = load_spec(spec_path, spec_overrides(setup, seed, folder, extra))
    stop, spent = threading.Event(), [0]

    def steps(step: str, number: int, seconds: float) -> None:
        if step == "prune":  # one report per epoch of this study's own trials
            spent[0] += 1
        elif step == "trial" and spent[0] >= setup.budget:
            stop.set()

    with Timer() as t, contextlib.redirect_stdout(io.StringIO()):
        work(spec, quiet=True, stop=stop, steps=steps)
    s = read(spec, setup.budget if cut else 10**9, t.s)
    s.ran = spent[0]
    s.until = spec.warm_until if spec.warm_start.study else None
    return s


def warm_up(src: Setup, spec_path: Path) -> None:
    """Pay the process's one-time costs before anything is timed: the imports of the trial loop
    (optuna, sqlalchemy and alembic, tensorboard, pydantic: 1.2 s here), torch's optimizer module
    importing torch._dynamo on first use (3 s), the IDX files unzipped once per process. Unwarmed,
    they land on whichever search runs first, the source. A throw-away two-trial search on tiny
    subsets pays them all."""
    import torch._dynamo  # noqa: F401

    from hpsearch.parts.data import FASHION_MNIST

    FASHION_MNIST.load({"dataset": "fashion_mnist", **src.fixed})
    with tempfile.TemporaryDirectory() as tmp:
        search(source_setup(True, 2), 0, Path(tmp), [], spec_path)


def read(spec: Any, budget: int, wall_s: float) -> Search:
    import optuna

    study = optuna.load_study(study_name=spec.study, storage=spec.storage_url)
    own = [t for t in study.get_trials(deepcopy=False) if t.datetime_complete and "imported_from" not in t.user_attrs]
    own.sort(key=lambda t: t.datetime_complete)
    ok = optuna.trial.TrialState.COMPLETE
    trials, spent, at_s = [], 0, []
    began = min((t.datetime_start for t in own if t.datetime_start), default=None)
    for t in own:
        epochs = int(t.user_attrs.get("epochs") or 0)
        if spent + epochs > budget:
            break
        spent += epochs
        trials.append(Trial(epochs, t.value if t.state == ok else None, t.user_attrs.get("config") or {}))
        at_s.append((t.datetime_complete - began).total_seconds() if began and t.datetime_complete else math.nan)
    imported = study.user_attrs.get("imported") or {}
    s = Search(trials, spent, wall_s, imported=int(imported.get("trials", 0)), skipped=int(imported.get("skipped", 0)), at_s=at_s)
    scored = [x for x in trials if x.value is not None and math.isfinite(x.value)]
    s.best_config = max(scored, key=lambda x: x.value).config if scored else None
    return s


def final_best(s: Search) -> float:
    return max((t.value for t in s.trials if t.value is not None and math.isfinite(t.value)), default=math.nan)


def one_seed(seed: int, full: Setup, src: Setup, cache: Path, top: int, spec_path: Path = SPEC) -> dict[str, Any]:
    warm_up(src, spec_path)
    with tempfile.TemporaryDirectory() as tmp:
        # The source is another run: with the cold search's sampler seed its TPE would replay the cold
        # search's first configs (same random start-up draws, then similar models), and the warm start
        # would be handed the cold search's own later finds.
        source = search(src, SOURCE_SEED + seed, Path(tmp) / "source", [], spec_path, cut=False)
        db = Path(tmp) / "source" / f"sq-{SOURCE_SEED + seed}" / "study.db"
        cold = search(full, seed, Path(tmp) / "cold", [], spec_path)
        warm = search(
            full,
            seed,
            Path(tmp) / "warm",
            [f"warm_start.study=sq-{SOURCE_SEED + seed}", f"warm_start.storage=sqlite:///{db}", f"warm_start.top={top}"],
            spec_path,
        )
    for s in (cold, warm):
        if s.best_config is not None:
            s.test_acc, _ = retrain(full, s.best_config, cache)
    source_cost = source.spent * (src.fixed.get("train_subset") or SOURCE_TRAIN) / (full.fixed.get("train_subset") or FULL_TRAIN)
    # seconds, as measured: an epoch of a batch-32 config costs several of a batch-256 one, which epochs hide
    source_s = source.last_s(math.nan)
    target = final_best(cold)
    cold_curve, warm_curve, cold_curve_s, warm_curve_s = curve_of(cold), curve_of(warm), seconds_curve(cold), seconds_curve(warm)
    cold_reach_s = epochs_to(cold_curve_s, target)  # the first point at or above the target, here in seconds
    warm_reach_s = epochs_to(warm_curve_s, target)
    cold_reach = epochs_to(cold_curve, target)
    warm_own = epochs_to(warm_curve, target)
    warm_near = epochs_to(warm_curve, target - WITHIN)
    cold_near = epochs_to(cold_curve, target - WITHIN)
    row = {
        "seed": seed,
        "source_epochs": source.spent,
        "source_cost_full_epochs": source_cost,
        "source_s": source_s,
        "source_trials": len(source.trials),
        "source_best": final_best(source),
        "imported": warm.imported,
        "skipped": warm.skipped,
        "cold_final_best": target,
        "warm_final_best": final_best(warm),
        "cold_epochs_to_its_best": cold_reach,
        "warm_own_epochs_to_cold_best": warm_own,
        "warm_cost_to_cold_best": None if warm_own is None else source_cost + warm_own,
        "cold_s_to_its_best": cold_reach_s,
        "warm_s_to_cold_best": None if warm_reach_s is None else source_s + warm_reach_s,
        "warm_cost_to_within_0_3_points": None if warm_near is None else source_cost + warm_near,
        "cold_epochs_to_within_0_3_points": cold_near,
        "cold_curve": cold_curve,  # (own epochs, best val_acc so far)
        "warm_curve": warm_curve,  # own epochs: add source_cost_full_epochs for the total
        "cold_curve_s": cold_curve_s,
        "warm_curve_s": warm_curve_s,  # own seconds: add source_s for the total
        "warm_best_at_equal_total": best_within(warm_curve, full.budget - source_cost),
        "cold_test_acc": cold.test_acc,
        "warm_test_acc": warm.test_acc,
        "wall_s": {"source": source.wall_s, "cold": cold.wall_s, "warm": warm.wall_s},
        "cold_trials": len(cold.trials),
        "warm_trials": len(warm.trials),
        "cold_best_config": cold.best_config,
        "warm_best_config": warm.best_config,
        "warm_best_is_a_reevaluated_source_config": warm.best_config is not None
        and any(same_params(warm.best_config, t.config) for t in warm.trials[:top]),
        "ran_epochs": {"source": source.ran, "cold": cold.ran, "warm": warm.ran},
        "spent_epochs": {"cold": cold.spent, "warm": warm.spent},  # own epochs within the budget
        "spent_s": {"cold": cold.last_s(0.0), "warm": warm.last_s(0.0)},  # own seconds until the last trial within the budget completed
        "warm_sampler_until": warm.until,
        "choices": {k: choices(x) for k, x in (("source", source), ("cold", cold), ("warm", warm))},
    }
    row["ratio"] = None if row["warm_cost_to_cold_best"] is None or not cold_reach else row["warm_cost_to_cold_best"] / cold_reach
    row["ratio_by_seconds"] = None if row["warm_s_to_cold_best"] is None or not cold_reach_s else row["warm_s_to_cold_best"] / cold_reach_s
    row["epoch_s"] = {k: x.at_s[-1] / x.spent if x.at_s and x.spent else None for k, x in (("cold", cold), ("warm", warm))}
    near = row["warm_cost_to_within_0_3_points"]
    row["ratio_within_0_3_points"] = None if near is None or not cold_near else near / cold_near
    shown = {k: v for k, v in row.items() if k not in ("wall_s", "cold_curve", "warm_curve", "cold_best_config", "warm_best_config")}
    print(f"  seed {seed}: {json.dumps(shown, default=str)}", flush=True)
    return row


CATEGORICAL = ("optimizer", "schedule", "batch_size")  # what each search chose, as shares of its trials
NUMERIC = ("label_smoothing", "warmup_epochs")


def choices(s: Search) -> dict[str, Any]:
    """Where a search spent its trials: the share of each categorical value and the median of some
    numeric ones. A cheap setting ranks configs with a bias of its own (2 epochs on a subset favour
    configs that learn fast and need no decay); these show whether the warm start inherited it."""
    configs = [t.config for t in s.trials if t.config]
    out: dict[str, Any] = {"trials": len(configs)}
    for key in CATEGORICAL:
        values = [str(c[key]) for c in configs if key in c]
        out[key] = {v: values.count(v) / len(values) for v in sorted(set(values))} if values else {}
    for key in NUMERIC:
        values = [float(c[key]) for c in configs if isinstance(c.get(key), int | float)]
        out[f"{key}_median"] = statistics.median(values) if values else None
    return out


def seconds_curve(s: Search) -> list[tuple[float, float]]:
    """(seconds since the search's first trial started, best val_acc so far) after each completed trial that improved it."""
    points, best = [], -math.inf
    for t, at in zip(s.trials, s.at_s, strict=True):
        if t.value is not None and math.isfinite(t.value) and t.value > best:
            best = t.value
            points.append((at, best))
    return points


def curve_of(s: Search) -> list[tuple[int, float]]:
    return curve(s.trials)


def ert(rows: list[dict[str, Any]], kind: str, target: float, seconds: bool) -> tuple[float | None, int]:
    """Expected running time to ``target`` (as in the COCO/BBOB benchmarks): the compute all seeds
    spent, each until it reached the target or to the end of its budget, over the seeds that
    reached it; None where none did. Warm counts the source's cost in both. A common target for all
    seeds and both starts, unlike "cold's own final best", which is the lucky top draw of one search."""
    spent, reached = 0.0, 0
    for r in rows:
        source = (r["source_s"] if seconds else r["source_cost_full_epochs"]) if kind == "warm" else 0.0
        points = r[f"{kind}_curve_s" if seconds else f"{kind}_curve"]
        at = epochs_to(points, target)
        total = r["spent_s"][kind] if seconds else r["spent_epochs"][kind]
        spent += source + (total if at is None else at)
        reached += at is not None
    return (spent / reached if reached else None), reached


def ert_figures(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """ERT, cold and warm, in epochs and seconds, at two common targets: the cold starts' median final
    best (what a cold start typically ends with) and half a point below it."""
    typical = statistics.median(r["cold_final_best"] for r in rows)
    out = {}
    for name, target in (("typical_cold_final_best", typical), ("half_a_point_below", typical - 0.005)):
        f: dict[str, Any] = {"target": target}
        for unit, seconds in (("epochs", False), ("s", True)):
            for kind in ("cold", "warm"):
                f[f"{kind}_{unit}"], f[f"{kind}_reached"] = ert(rows, kind, target, seconds)
            cold, warm = f[f"cold_{unit}"], f[f"warm_{unit}"]
            f[f"ratio_{unit}"] = None if cold is None or warm is None else warm / cold
        out[name] = f
    return out


def ert_text(figures: dict[str, dict[str, Any]]) -> str:
    def ratio(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    parts = [
        f"{100 * f['target']:.2f} %: {ratio(f['ratio_epochs'])} in epochs, {ratio(f['ratio_s'])} in seconds "
        f"(reached by {f['cold_reached']} cold, {f['warm_reached']} warm)"
        for f in figures.values()
    ]
    return "; expected running time warm/cold to a common target (" + "; ".join(parts) + ")"


def best_within(points: list[tuple[int, float]], epochs: float) -> float | None:
    return max((v for e, v in points if e <= epochs), default=None)


def med(values: list[Any]) -> float | None:
    """A seed that never got there counts as infinitely expensive."""
    m = statistics.median([math.inf if v is None else v for v in values]) if values else math.inf
    return None if math.isinf(m) else m


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--budget", type=int, default=72, help="epochs of the full study's own trials, cold and warm (default 72)")
    p.add_argument(
        "--source-budget",
        type=int,
        default=48,
        help="epochs of the cheap source study (default 48: 12 full-setting epochs by its training images)",
    )
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--source-train", type=int, default=SOURCE_TRAIN, help=f"the source's training images (default {SOURCE_TRAIN})")
    p.add_argument("--source-epochs", type=int, default=SOURCE_EPOCHS, help=f"epochs per source trial (default {SOURCE_EPOCHS})")
    p.add_argument("--source-val", type=int, default=SOURCE_VAL, help=f"the source's validation images (default {SOURCE_VAL})")
    p.add_argument(
        "--first-seed", type=int, default=0, help="seeds first-seed, first-seed+1, ... (fresh seeds for a check of a choice made on others)"
    )
    p.add_argument("--top", type=int, default=TOP, help=f"warm_start.top: source configs re-evaluated first (default {TOP})")
    p.add_argument("--jobs", type=int, default=1, help="seeds run at once, one process each (default 1; each search uses one thread)")
    p.add_argument(
        "--spec",
        type=Path,
        default=SPEC,
        help="the full study's spec (default bench/spaces/bench_fashion.yaml; bench/spaces/bench_fashion_wide.yaml: the same task, wide ranges)",
    )
    args = p.parse_args(argv)
    args.spec = args.spec.resolve()
    started = time.perf_counter()
    full = setup_for(args.smoke, args.budget, 6)
    src = source_setup(args.smoke, args.source_budget, args.source_train, args.source_val, args.source_epochs)
    if args.smoke:
        args.seeds = 1
    with tempfile.TemporaryDirectory() as cache:
        rows: list[dict[str, Any]] = []
        # the result is written after every seed: a cut-short run keeps what it measured
        if args.jobs <= 1:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                rows.append(one_seed(seed, full, src, Path(cache), args.top, args.spec))
                report(args, rows, full, src, started)
            return
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [
                pool.submit(one_seed, seed, full, src, Path(cache), args.top, args.spec)
                for seed in range(args.first_seed, args.first_seed + args.seeds)
            ]
            for done in as_completed(futures):
                rows.append(done.result())
                rows.sort(key=lambda r: r["seed"])
                report(args, rows, full, src, started)


def plot(rows: list[dict[str, Any]], budget: int, source_train: int, path: Path, source_epochs: int = SOURCE_EPOCHS) -> None:
    """Best val so far against total compute, in epochs (left) and measured seconds (right): cold
    from 0, warm (dashed) from the source's cost on, one colour per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    panels = (
        (axes[0], "cold_curve", "warm_curve", "source_cost_full_epochs", "full-setting epochs (the source counted by its training images)"),
        (axes[1], "cold_curve_s", "warm_curve_s", "source_s", "seconds, as measured (the source's whole run counted)"),
    )
    for ax, cold_key, warm_key, cost_key, xlabel in panels:
        end = max([e for r in rows for k in (cold_key, warm_key) for e, _ in r[k]] + [float(budget)])
        for i, r in enumerate(rows):
            color = f"C{i % 10}"
            for key, shift, style in ((cold_key, 0.0, "-"), (warm_key, r[cost_key], "--")):
                if not r[key]:
                    continue
                xs = [shift] + [e + shift for e, _ in r[key]] + [end + shift]
                ys = [math.nan] + [100 * v for _, v in r[key]] + [100 * r[key][-1][1]]
                label = f"seed {r['seed']} {'cold' if key == cold_key else 'warm'}" if ax is axes[0] else None
                ax.step(xs, ys, where="post", linestyle=style, color=color, label=label)
            ax.axvline(r[cost_key], color=color, linewidth=0.6, linestyle=":")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("best validation accuracy so far (%)")
    axes[0].legend(fontsize=7, loc="lower right", ncol=2)
    fig.suptitle(f"Fashion-MNIST, MLP: cold start (solid) vs warm start (dashed) from a {source_train}-image, {source_epochs}-epoch study")
    finals = [100 * v for r in rows for k in ("cold_curve", "warm_curve") for _, v in r[k]]
    if finals:
        axes[0].set_ylim(max(finals) - 4, max(finals) + 0.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def result_name(spec: Path) -> str:
    """warm_start for the benchmark's spec, warm_start_<variant> for bench/spaces/bench_fashion_<variant>.yaml."""
    return "warm_start" if spec == SPEC.resolve() else "warm_start_" + spec.stem.removeprefix("bench_fashion_")


def same_params(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "seed"} == {k: v for k, v in b.items() if k != "seed"}


def report(args: Any, rows: list[dict[str, Any]], full: Setup, src: Setup, started: float) -> None:
    ratio = med([r["ratio"] for r in rows])
    by_s = med([r["ratio_by_seconds"] for r in rows])
    reached = sum(r["warm_cost_to_cold_best"] is not None for r in rows)
    # met only when the source is cheap enough by both counts: its training images and its measured seconds
    met = ratio is not None and by_s is not None and ratio < 1 and by_s < 1 and reached * 2 > len(rows)
    source_s = statistics.median(r["source_s"] for r in rows)
    figures = {
        "budget_epochs": full.budget,
        "source_budget_epochs": src.budget,
        "source_setting": src.fixed,
        "source_cost_full_epochs": statistics.median(r["source_cost_full_epochs"] for r in rows),
        "source_s": source_s,
        "top": args.top,
        "seeds": len(rows),
        "jobs": args.jobs,
        "median_ratio_warm_to_cold": ratio,
        "median_ratio_warm_to_cold_by_seconds": by_s,
        "median_ratio_within_0_3_points": med([r["ratio_within_0_3_points"] for r in rows]),
        "png": f"{result_name(args.spec)}.png",
        "seeds_warm_reached_cold_best": reached,
        "median_test_acc_cold": statistics.median(r["cold_test_acc"] for r in rows if r["cold_test_acc"] is not None),
        "median_test_acc_warm": statistics.median(r["warm_test_acc"] for r in rows if r["warm_test_acc"] is not None),
        "spec": str(args.spec.relative_to(ROOT)) if args.spec.is_relative_to(ROOT) else str(args.spec),
        "ert": ert_figures(rows),
        "per_seed": rows,
    }
    columns = [
        "seed",
        "cold: final best val % (epoch reached)",
        "warm: final best val %",
        "warm: cost to cold's best (source + own epochs)",
        "ratio warm / cold: epochs / seconds",
        "within 0.3 points: cold / warm cost",
        "warm best at equal total compute",
        "imported (skipped)",
        "test % cold / warm",
        "wall s source / cold / warm",
    ]
    table_rows = []
    for r in rows:
        cost = (
            "never"
            if r["warm_cost_to_cold_best"] is None
            else f"{r['warm_cost_to_cold_best']:g} ({r['source_cost_full_epochs']:g} + {r['warm_own_epochs_to_cold_best']})"
        )
        w = r["wall_s"]
        table_rows.append(
            [
                r["seed"],
                f"{pct(r['cold_final_best'])} ({r['cold_epochs_to_its_best']})",
                pct(r["warm_final_best"]),
                cost,
                "never" if r["ratio"] is None else f"{r['ratio']:.2f} / {r['ratio_by_seconds']:.2f}",
                f"{r['cold_epochs_to_within_0_3_points']} / "
                + ("never" if r["warm_cost_to_within_0_3_points"] is None else f"{r['warm_cost_to_within_0_3_points']:g}"),
                pct(r["warm_best_at_equal_total"]),
                f"{r['imported']} ({r['skipped']})",
                f"{pct(r['cold_test_acc'])} / {pct(r['warm_test_acc'])}",
                f"{w['source']:.0f} / {w['cold']:.0f} / {w['warm']:.0f}",
            ]
        )
    verdict = "met" if met else "not met"
    headline = (
        f"warm start reached the cold start's final best in {reached} of {len(rows)} seeds; median cost ratio warm/cold "
        + ("n/a (not reached in most seeds)" if ratio is None else f"{ratio:.2f}")
        + f" in epochs (the source counted as {figures['source_cost_full_epochs']:g} full-setting epochs by its training images), "
        + ("n/a" if by_s is None else f"{by_s:.2f}")
        + f" in measured seconds (the source's {source_s:.0f} s included); goal {verdict}"
        + ert_text(figures["ert"])
    )
    notes = [
        f"Source study: {src.budget} epochs of {src.epochs}-epoch trials on {src.fixed.get('train_subset')} training and {src.fixed.get('val_subset')} "
        f"validation images. Compute is counted two ways. In epochs: the source as {figures['source_cost_full_epochs']:g} full-setting "
        f"epochs by its training images ({src.fixed.get('train_subset')}/{FULL_TRAIN} per epoch). In seconds, as measured: "
        "each search's time from its first trial's start to the completion of the trial that reached the target, the "
        f"source's whole run (median {source_s:.0f} s) added to the warm start's. Seconds see what epochs hide: "
        "an epoch at batch size 32 costs several at 256, and each trial pays for building its model and data. "
        "The goal needs both medians below 1.",
        "Target per seed: the cold start's final best val_acc within its budget; 'epoch reached' is the cumulative epoch at "
        "which the cold start found it. Ratio = (source cost + warm epochs until its best reached the target) / cold's epoch "
        "reached. A seed where the warm start never reached the target counts as infinitely expensive in the median.",
        f"Goal (issue 13): the same best with less compute, i.e. ratio < 1 in most seeds — {verdict}"
        + ("" if met else " (see the table: which seeds missed and by how much)")
        + f". Both searches have the same {full.budget} epochs of their own trials; 'warm best at equal total compute' is the "
        f"warm start's best within {full.budget} minus the source's cost (by images), the comparison at an equal total.",
        (
            f"The warm study re-evaluates the source's best {args.top} configs first (they count toward its budget) and imports every "
            if args.top
            else "The warm study re-evaluates nothing (top 0) and imports every "
        )
        + "completed source trial that fits the space (here the same space, so none are skipped; pruned and failed source trials are not imported). Imported values were measured "
        f"on {src.fixed.get('train_subset')} images over {src.epochs} epoch{'s' if src.epochs > 1 else ''}, below any full-setting value; the sampler sees them moved onto this study's scale "
        "(hpsearch.study.warmstart.WarmSampler: by the median gap of the re-evaluated configs' two values, or with top 0 of the two studies' medians), so TPE ranks the source's regions among this "
        f"study's own trials instead of below all of them, and only until {rows[0].get('warm_sampler_until')} of this study's own trials finished "
        "(warm_start.until, by default the sampler's start-up), after which it sees its own alone. Best, promote and the "
        "pruner's start-up use the study's own trials only.",
        f"The source study of seed s runs with sampler and training seed {SOURCE_SEED}+s: with the cold search's own seed, "
        "its TPE replays the cold search's path (the same random start-up configs, then near-identical proposals), and the "
        "warm start would be handed configs the cold search finds later anyway.",
        f"{len(rows)} seed(s) of {args.seeds} planned, {args.jobs} at a time (one process each; source, cold and warm of "
        "a seed run one after another in its process, one thread each); 5,000 validation images, so a few tenths of a "
        "point are within noise. Each process pays its one-time costs (imports, torch._dynamo's, unzipping the IDX files) "
        "in a throw-away two-trial search before anything is timed. Training is deterministic on one machine (CPU, "
        "one thread, seeded): a cold start of seed s trains the same trials in every run there; another CPU model's kernels "
        "round differently (a first trial's val_acc 1 image in 5,000 apart), and the searches part from there.",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    plot(rows, full.budget, int(src.fixed.get("train_subset") or SOURCE_TRAIN), args.out / figures["png"], src.epochs)
    wide = result_name(args.spec) != "warm_start"
    write_result(
        args.out,
        result_name(args.spec),
        f"Warm start from a cheaper study (Fashion-MNIST{', ' + args.spec.name if wide else ''})",
        headline=headline,
        smoke=args.smoke,
        goal=f"on {figures['spec']}, a study warm-started from a cheaper study ({src.fixed.get('train_subset')} of the 12,000 images, {src.epochs}-epoch trials) reaches the cold start's final best with less total compute (ratio < 1 in epochs and in measured seconds)",
        goal_met=None if args.smoke else met,
        figures=figures,
        table={"columns": columns, "rows": table_rows},
        notes=notes,
        started=started,
    )


if __name__ == "__main__":
    main()
