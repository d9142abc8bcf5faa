"""Tier C (live) of the search-quality benchmark, first version: search quality on Fashion-MNIST: best accuracy per epoch of compute, for six ways to pick hyperparameters.

Every method searches bench/spaces/bench_fashion.yaml (an MLP on 12,000 training images, 5,000
validation images, 6 epochs per trial) with the same budget in epochs, for several seeds:

    random      hpsearch, random sampler, no pruning
    optuna_tpe  a plain Optuna script as the tutorial has it (TPESampler(seed), no pruning,
                in-memory study), written inline below, calling the same objective
    hpsearch    hpsearch's defaults: TPE as hpsearch configures it, median pruner
    hyperband   hpsearch, TPE + Optuna's HyperbandPruner
    ray_asha    hpsearch on Ray Tune (`backend: ray`, ASHA), 2 trials at a time
    default     no search: the tutorial's config (Adam, lr 1e-3, batch 64, constant lr) trained
                for the whole budget, best epoch so far as its curve
    lrfind      `hpsearch lr-find SPEC --apply` first (its training steps count against the budget,
                as epochs of the 12k-image split, rounded up), then hpsearch's defaults on the
                narrowed spec for the rest of the budget

An epoch is one reported epoch of one trial (pruned trials count the epochs they ran). A
search may start a trial while it has spent less than the budget; a trial that ends past
the budget does not count. Each search's best config (best final val_acc among completed
trials) is then retrained on the full 54,000-image train split for 6 epochs and scored on
the 10,000 test images. Searches run one trial at a time on one thread, two searches side
by side (`--jobs`); Ray runs alone afterwards with 2 one-thread trials at a time.
OMP_WAIT_POLICY=PASSIVE is set for every process started (the machine is shared).

    .venv/bin/python bench/search_quality_live.py             # 72 epochs x 3 seeds x 6 methods (~35 min on 2 busy cores)
    .venv/bin/python bench/search_quality_live.py --smoke     # seconds: tiny subsets, 2 one-epoch trials per method, no Ray
    .venv/bin/python bench/search_quality_live.py --methods lrfind   # one row, merged into the committed result (same setup)
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from common import BENCH_SPEC as SPEC
from common import ROOT, WITHIN, EpochCount, Setup, Timer, Trial, curve, epochs_to, parser, retrain, setup_for, spec_overrides, write_result

METHODS = {  # name -> label; the order of the table and the plot
    "random": "random search, no pruning",
    "optuna_tpe": "Optuna TPE script, no pruning",
    "hpsearch": "hpsearch defaults (TPE + median pruner)",
    "hyperband": "hpsearch, TPE + hyperband",
    "ray_asha": "hpsearch on Ray Tune, ASHA",
    "default": "tutorial default, no search",
    "lrfind": "hpsearch defaults on lr-find's ranges (its cost counted)",
}
OVERRIDES = {  # hpsearch methods: --set values on top of the spec (the spec leaves sampler and pruner at their defaults)
    "random": ["sampler.name=random", "pruner.name=none"],
    "hpsearch": [],
    "hyperband": ["pruner.name=hyperband"],
    "ray_asha": ["backend=ray", "ray.scheduler=asha"],
}
TUTORIAL = {"optimizer": "adam", "lr": 1e-3, "batch_size": 64, "schedule": "constant", "weight_decay": 0.0}
ENV = {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@dataclass
class Run:
    method: str
    seed: int
    trials: list[Trial]  # in order of completion, cut at the budget
    spent: int  # epochs of those trials
    ran: int  # epochs run, the cut trials included
    pruned: int
    search_s: float
    test_acc: float | None = None
    retrain_s: float | None = None
    best_config: dict[str, Any] | None = None


# ---------------------------------------------------------------------------- the methods


def hpsearch_search(
    setup: Setup, seed: int, folder: Path, extra: list[str], spec_path: Path = SPEC, budget: int | None = None
) -> tuple[list[Trial], int]:
    """hpsearch's trial loop in this process (what `hpsearch run` does with one slot), stopped on the epoch budget
    (`budget`: what is left of setup.budget)."""
    from hpsearch.engine.optuna import work
    from hpsearch.spec.loader import load_spec

    spec = load_spec(spec_path, spec_overrides(setup, seed, folder, extra))
    stop, spent = threading.Event(), [0]
    left = setup.budget if budget is None else budget

    def steps(step: str, number: int, seconds: float) -> None:
        if step == "prune":  # one trial.report + should_prune per reported epoch
            spent[0] += 1
        elif step == "trial" and spent[0] >= left:
            stop.set()  # no new trial; the loop ends

    with contextlib.redirect_stdout(io.StringIO()):
        work(spec, quiet=True, stop=stop, steps=steps)
    return stored_trials(spec)


def lrfind_search(setup: Setup, seed: int, folder: Path) -> tuple[list[Trial], int]:
    """What `hpsearch lr-find SPEC --apply narrowed.yaml` does (same seed and fixed values as the search), then
    hpsearch's defaults on narrowed.yaml. lr-find's training steps, as epochs of the training split rounded up,
    come first in the trial list (a pseudo-trial without a value), so they count against the epoch budget."""
    from hpsearch.spec.loader import load_spec
    from hpsearch.tools import lrfind

    spec = load_spec(SPEC, spec_overrides(setup, seed, folder, []))
    with contextlib.redirect_stdout(io.StringIO()):
        curves = lrfind.run(spec, out=folder / "lr-find")
        narrowed = lrfind.write(spec, curves, folder / "narrowed.yaml")
    cost = math.ceil(sum(c.epochs for c in curves) - 1e-9)
    found = {
        c.target.option: {"suggested": list(c.suggested), "lr_at_min": c.lr_at_min, "steps": len(c.lrs), "epochs": c.epochs, "stop": c.stop}
        for c in curves
    }
    trials, pruned = hpsearch_search(setup, seed, folder, [], spec_path=narrowed, budget=setup.budget - cost)
    return [Trial(cost, None, {"lr_find": found}), *trials], pruned


def lr_find_cost(trials: list[Trial]) -> Trial | None:
    """The lrfind method's pseudo-trial holding lr-find's cost and suggestions."""
    return trials[0] if trials and "lr_find" in trials[0].config else None


def ray_search(setup: Setup, seed: int, folder: Path, attempts: int = 2) -> tuple[list[Trial], int]:
    """`hpsearch run SPEC --backend ray` as a user types it, `ray_trials` trials. On a loaded machine the local
    Ray once failed to start ("Failed to connect to GCS within 60 seconds"): a failed run is retried once, in a new folder."""
    from hpsearch.spec.loader import load_spec

    for attempt in range(1, attempts + 1):
        sets = spec_overrides(setup, seed, folder / f"attempt-{attempt}", OVERRIDES["ray_asha"], trials=setup.ray_trials)
        cmd = [sys.executable, "-m", "hpsearch.cli", "run", str(SPEC), "--quiet", *[a for s in sets for a in ("--set", s)]]
        proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=3600, check=False)
        if proc.returncode == 0:
            return stored_trials(load_spec(SPEC, sets))
        print(
            f"ray_asha seed {seed}: attempt {attempt} exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}",
            file=sys.stderr,
            flush=True,
        )
    raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")


def stored_trials(spec: Any) -> tuple[list[Trial], int]:
    """Finished trials in order of completion, and how many were pruned."""
    import optuna

    study = optuna.load_study(study_name=spec.study, storage=spec.storage_url)
    done = sorted((t for t in study.get_trials(deepcopy=False) if t.datetime_complete), key=lambda t: t.datetime_complete)
    trials = [
        Trial(
            int(t.user_attrs.get("epochs") or 0),
            t.value if t.state == optuna.trial.TrialState.COMPLETE else None,
            t.user_attrs.get("config") or {},
        )
        for t in done
    ]
    return trials, sum(t.state == optuna.trial.TrialState.PRUNED for t in done)


def fixed_config(setup: Setup, seed: int) -> dict[str, Any]:
    fixed = yaml.safe_load(SPEC.read_text())["fixed"]
    return {**fixed, **setup.fixed, "seed": seed}


def optuna_script(setup: Setup, seed: int) -> tuple[list[Trial], int]:
    """What a user writes after Optuna's tutorial: same space and objective, TPE with its defaults, no pruning."""
    import optuna

    from hpsearch.objectives.image_classification import train

    fixed = fixed_config(setup, seed)

    def objective(trial: optuna.Trial) -> float:
        config = dict(fixed)  # the same bounds as bench/spaces/bench_fashion.yaml
        config["optimizer"] = trial.suggest_categorical("optimizer", ["sgd", "adamw"])
        if config["optimizer"] == "sgd":
            config["lr"] = trial.suggest_float("sgd_lr", 3e-3, 0.5, log=True)
            config["momentum"] = trial.suggest_float("momentum", 0.5, 0.99)
            config["nesterov"] = trial.suggest_categorical("nesterov", [True, False])
        else:
            config["lr"] = trial.suggest_float("adamw_lr", 1e-4, 1e-2, log=True)
            config["beta2"] = trial.suggest_float("beta2", 0.9, 0.999)
        config["batch_size"] = trial.suggest_categorical("batch_size", [32, 64, 128, 256])
        config["weight_decay"] = trial.suggest_float("weight_decay", 1e-6, 1e-2, log=True)
        config["schedule"] = trial.suggest_categorical("schedule", ["cosine", "linear", "constant"])
        config["warmup_epochs"] = trial.suggest_float("warmup_epochs", 0.0, 1.0)
        config["label_smoothing"] = trial.suggest_float("label_smoothing", 0.0, 0.2)
        reporter = EpochCount()
        try:
            return train(config, reporter)["val_acc"]
        finally:
            trial.set_user_attr("epochs", reporter.epochs)
            trial.set_user_attr("config", config)

    def stop_at_budget(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if sum(t.user_attrs.get("epochs", 0) for t in study.get_trials(deepcopy=False)) >= setup.budget:
            study.stop()

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.optimize(objective, callbacks=[stop_at_budget], catch=(FloatingPointError,))  # a diverged trial fails, the study goes on
    ok = optuna.trial.TrialState.COMPLETE
    return [Trial(t.user_attrs["epochs"], t.value if t.state == ok else None, t.user_attrs["config"]) for t in study.trials], 0


def tutorial_default(setup: Setup, seed: int) -> tuple[list[Trial], int]:
    """One run of the tutorial config for the whole budget; each epoch is a checkpoint one could keep."""
    from hpsearch.objectives.image_classification import train

    config = {**fixed_config(setup, seed), **TUTORIAL, "epochs": setup.budget}
    reporter = EpochCount()
    train(config, reporter)
    return [Trial(1, acc, {**config, "epochs": setup.epochs}) for acc in reporter.val_acc], 0


def run_method(method: str, seed: int, setup: Setup, cache: Path | None = None) -> Run:
    with tempfile.TemporaryDirectory() as tmp, Timer() as t:
        if method == "optuna_tpe":
            trials, pruned = optuna_script(setup, seed)
        elif method == "default":
            trials, pruned = tutorial_default(setup, seed)
        elif method == "ray_asha":
            trials, pruned = ray_search(setup, seed, Path(tmp))
        elif method == "lrfind":
            trials, pruned = lrfind_search(setup, seed, Path(tmp))
        else:
            trials, pruned = hpsearch_search(setup, seed, Path(tmp), OVERRIDES[method])
    kept = within_budget(trials, setup.budget)
    run = Run(method, seed, kept, sum(x.epochs for x in kept), sum(x.epochs for x in trials), pruned, t.s)
    scored = [x for x in kept if x.value is not None and math.isfinite(x.value)]
    if scored:
        run.best_config = max(scored, key=lambda x: x.value).config
        run.test_acc, run.retrain_s = retrain(setup, run.best_config, cache)
    return run


def within_budget(trials: list[Trial], budget: int) -> list[Trial]:
    kept, spent = [], 0
    for trial in trials:
        spent += trial.epochs
        if spent > budget:
            break
        kept.append(trial)
    return kept


# ---------------------------------------------------------------------------- one run per interpreter, two at a time


def in_child(method: str, seed: int, args: Any) -> Run:
    """One search in a fresh interpreter; with --keep, its result is kept there and reused by the next invocation."""
    with tempfile.TemporaryDirectory() as tmp:
        out = (args.keep or Path(tmp)) / f"{method}-{seed}-b{args.budget}-e{args.epochs}.json"
        if not out.is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            cmd = [
                sys.executable,
                __file__,
                "--child",
                method,
                "--seed",
                str(seed),
                "--result",
                str(out),
                "--budget",
                str(args.budget),
                "--epochs",
                str(args.epochs),
                "--retrains",
                str(args.retrains),
            ]
            cmd += [a for v in args.variant for a in ("--variant", v)]
            proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=7200, check=False)
            if proc.returncode != 0 or not out.is_file():
                raise RuntimeError(f"{method} seed {seed} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        data = json.loads(out.read_text())
    data["trials"] = [Trial(**x) for x in data["trials"]]
    return Run(**data)


def run_all(args: Any, setup: Setup) -> list[Run]:
    """Seed by seed, every method; fresh interpreters, `--jobs` at a time; Ray alone at the end (it uses every core)."""
    selected = args.methods or list(METHODS)
    plain = [(m, s) for s in range(args.seeds) for m in METHODS if m != "ray_asha" and m in selected]
    ray = [("ray_asha", s) for s in range(args.seeds)] if setup.ray_trials and "ray_asha" in selected else []
    if args.jobs <= 1:
        runs = [logged(run_method(m, s, setup, args.retrains)) for m, s in plain]
    else:
        with ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda job: logged(in_child(*job, args)), plain))
    return runs + [logged(in_child(m, s, args)) for m, s in ray]


def logged(run: Run) -> Run:
    best = max((t.value for t in run.trials if t.value is not None), default=float("nan"))
    print(
        f"  {run.method} seed {run.seed}: {len(run.trials)} trials, {run.spent} epochs ({run.ran} run), best val {best:.4f}, "
        f"test {run.test_acc}, search {run.search_s:.0f} s, retrain {run.retrain_s or 0:.0f} s",
        flush=True,
    )
    return run


# ---------------------------------------------------------------------------- curves and figures


def best_at(points: list[tuple[int, float]], epochs: float) -> float:
    return max((v for e, v in points if e <= epochs), default=float("nan"))


def median_or_none(values: list[int | None]) -> float | None:
    """A run that never got there counts as infinitely many epochs."""
    m = statistics.median([math.inf if v is None else v for v in values])
    return None if math.isinf(m) else m


def summarize(runs: list[Run], setup: Setup, startup: int, target: float | None = None) -> dict[str, Any]:
    """`startup`: the TPE start-up trials, after which pruning is counted separately. `target`: random search's
    final best, from an earlier run when these runs do not include random search (--methods)."""
    by = {m: [r for r in runs if r.method == m] for m in METHODS}
    by = {m: rs for m, rs in by.items() if rs}
    final = {m: [best_at(curve(r.trials), setup.budget) for r in rs] for m, rs in by.items()}
    target = statistics.median(final["random"]) if target is None else target
    rows: dict[str, Any] = {}
    for m, rs in by.items():
        searched = {id(r): [t for t in r.trials if "lr_find" not in t.config] for r in rs}  # lr-find's cost is no trial
        reach = [epochs_to(curve(r.trials), target) for r in rs]
        tests = [r.test_acc for r in rs if r.test_acc is not None]
        rows[m] = {
            "label": METHODS[m],
            "final_best_val_acc": statistics.median(final[m]),
            "final_best_per_seed": final[m],
            "test_acc": statistics.median(tests) if tests else None,
            "test_acc_per_seed": [r.test_acc for r in rs],
            "epochs_to_random_best": median_or_none(reach),
            "epochs_to_random_best_per_seed": reach,
            "trials": statistics.median(len(searched[id(r)]) for r in rs),
            "pruned": statistics.median(r.pruned for r in rs),
            "epochs_spent": statistics.median(r.spent for r in rs),
            "epochs_run": statistics.median(r.ran for r in rs),
            "search_wall_s": statistics.median(r.search_s for r in rs),
            "retrain_wall_s": statistics.median(r.retrain_s or 0 for r in rs),
            "best_configs": [r.best_config for r in rs],
            "trials_after_startup": statistics.median(max(0, len(searched[id(r)]) - startup) for r in rs),
            "pruned_after_startup": statistics.median(sum(t.value is None for t in searched[id(r)][startup:]) for r in rs),
            "best_epoch_per_seed": [curve(r.trials)[-1][0] if curve(r.trials) else None for r in rs],  # default: the epoch it peaked
        }
        if any(lr_find_cost(r.trials) for r in rs):
            rows[m]["lr_find_per_seed"] = [(lr_find_cost(r.trials) or Trial(0, None)).config.get("lr_find") for r in rs]
            rows[m]["lr_find_epochs_per_seed"] = [(lr_find_cost(r.trials) or Trial(0, None)).epochs for r in rs]
    scored = [t.value for r in by.get("random", []) for t in r.trials if t.value is not None and math.isfinite(t.value)]
    top = {  # how wide the top of the space is: random draws near random's best, and the best trial any search ran
        "random_trials_within_0_3_points": sum(v >= target - WITHIN for v in scored) / len(scored) if scored else None,
        "best_trial_any_search": max(
            (t.value or 0.0 for m, rs in by.items() if m != "default" for r in rs for t in r.trials), default=None
        ),
    }
    return {"target": target, "rows": rows, "top": top, "curves": {m: [curve(r.trials) for r in rs] for m, rs in by.items()}}


def goals(s: dict[str, Any], setup: Setup) -> dict[str, Any]:
    rows = s["rows"]
    hp = rows["hpsearch"]
    reach = hp["epochs_to_random_best"]
    g1 = {
        "goal": "hpsearch defaults reach random search's final best with <= 1/3 of its epochs",
        "epochs": reach,
        "share_of_random": None if reach is None else reach / rows["random"]["epochs_spent"],
    }
    g1["met"] = g1["share_of_random"] is not None and g1["share_of_random"] <= 1 / 3
    gain = None
    if hp["test_acc"] is not None and rows["default"]["test_acc"] is not None:
        gain = 100 * (hp["test_acc"] - rows["default"]["test_acc"])
    g2 = {
        "goal": "hpsearch's best config, retrained: test accuracy >= tutorial default + 1.5 points",
        "gain_points": gain,
        "met": gain is not None and gain >= 1.5,
    }
    g3 = {
        "goal": "with pruning: within 0.3 points of the unpruned search's final best using <= 1/3 of its epochs",
        "reference": "optuna_tpe",
    }
    ref = rows["optuna_tpe"]
    for m in ("hpsearch", "hyperband", "ray_asha"):
        if m not in rows:
            continue
        reach_m = [epochs_to(c, ref["final_best_val_acc"] - WITHIN) for c in s["curves"][m]]
        epochs = median_or_none(reach_m)
        g3[m] = {
            "epochs_to_within": epochs,
            "per_seed": reach_m,
            "share": None if epochs is None else epochs / ref["epochs_spent"],
            "final_gap_points": 100 * (rows[m]["final_best_val_acc"] - ref["final_best_val_acc"]),
        }
    g3["met"] = g3["hpsearch"]["share"] is not None and g3["hpsearch"]["share"] <= 1 / 3
    return {"reach_random_best": g1, "test_gain": g2, "pruning": g3}


def hpsearch_defaults() -> dict[str, Any]:
    """What hpsearch builds from a spec that leaves sampler and pruner unset, read off the Optuna objects."""
    from hpsearch.spec.loader import load_spec
    from hpsearch.study.open import build_pruner, build_sampler

    spec = load_spec(SPEC)
    sampler, pruner = build_sampler(spec), build_pruner(spec)
    return {
        "sampler": type(sampler).__name__,
        "sampler_startup_trials": getattr(sampler, "_n_startup_trials", None),
        "pruner": type(pruner).__name__,
        "pruner_startup_trials": getattr(pruner, "_n_startup_trials", None),
        "pruner_warmup_epochs": spec.pruner.warmup_epochs,
    }


def startup_epochs(runs: list[Run], n: int | None) -> float | None:
    """Epochs the first n trials took (TPE samples them at random), median over seeds."""
    return None if not n or not runs else statistics.median(sum(t.epochs for t in r.trials[:n]) for r in runs)


def plot(s: dict[str, Any], setup: Setup, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.arange(0, setup.budget + 1)
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (m, curves) in enumerate(s["curves"].items()):
        values = np.array([[best_at(c, e) for e in grid] for c in curves]) * 100
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns before the first completed trial
            mid, low, high = np.nanmedian(values, 0), np.nanmin(values, 0), np.nanmax(values, 0)
        # same-seed searches share their first trials, so lines coincide for a while: wider lines first, drawn below
        style = (
            {"linestyle": "--", "color": "black", "linewidth": 1.5}
            if m == "default"
            else {"linewidth": max(1.5, 5.0 - 0.9 * i), "alpha": 0.8}
        )
        label = f"{METHODS[m]} (one {setup.budget}-epoch run, best epoch)" if m == "default" else METHODS[m]
        (line,) = ax.step(grid, mid, where="post", label=label, **style)
        ax.fill_between(grid, low, high, step="post", alpha=0.08, color=line.get_color())
    ax.axhline(100 * s["target"], color="gray", linewidth=0.8, linestyle=":", label="random search's final best (median)")
    finals = [100 * r["final_best_val_acc"] for r in s["rows"].values()]
    ax.set_ylim(min(finals) - 2.5, max(finals) + 0.8)
    ax.set_xlim(0, setup.budget)
    ax.set_xlabel("epochs trained, all trials of the search (12k-image epochs)")
    ax.set_ylabel("best validation accuracy so far (%)")
    ax.set_title(f"Fashion-MNIST, MLP, {setup.epochs}-epoch trials: median of {len(next(iter(s['curves'].values())))} seeds, band min-max")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def pct(v: float | None, digits: int = 2) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{100 * v:.{digits}f}"


def epochs_text(row: dict[str, Any]) -> str:
    seeds = ", ".join("-" if e is None else str(e) for e in row["epochs_to_random_best_per_seed"])
    median = row["epochs_to_random_best"]
    return f"{'not reached' if median is None else format(median, 'g')} ({seeds})"


def table(s: dict[str, Any]) -> dict[str, Any]:
    columns = [
        "method",
        "best val acc % (median; min-max)",
        "test acc % (best config retrained)",
        "epochs to reach random's best (per seed)",
        "trials (pruned)",
        "epochs counted / run",
        "search wall s",
    ]
    rows = []
    for row in s["rows"].values():
        lo, hi = min(row["final_best_per_seed"]), max(row["final_best_per_seed"])
        rows.append(
            [
                row["label"],
                f"{pct(row['final_best_val_acc'])} ({pct(lo)}-{pct(hi)})",
                pct(row["test_acc"]),
                epochs_text(row),
                f"{row['trials']:g} ({row['pruned']:g})",
                f"{row['epochs_spent']:g} / {row['epochs_run']:g}",
                f"{row['search_wall_s']:.0f}",
            ]
        )
    return {"columns": columns, "rows": rows}


def schedules(rows: dict[str, Any], skip: dict[str, Any]) -> str:
    found = [c.get("schedule") for r in rows.values() if r is not skip for c in r["best_configs"] if c]
    return ", ".join(f"{name} {found.count(name)}" for name in sorted(set(found), key=lambda x: -found.count(x)))


def notes(s: dict[str, Any], g: dict[str, Any], setup: Setup, defaults: dict[str, Any], seeds: int) -> list[str]:
    rows, n = s["rows"], defaults["sampler_startup_trials"]
    g1, g2, g3 = g["reach_random_best"], g["test_gain"], g["pruning"]
    hp, dflt = rows["hpsearch"], rows["default"]
    met = {True: "met", False: "**not met**"}
    searched = [r["test_acc"] for r in rows.values() if r is not dflt and r["test_acc"] is not None] or [math.nan]
    out = [
        f"Budget {setup.budget} epochs per search, {setup.epochs}-epoch trials, {seeds} seeds (the seed sets the sampler and "
        f"the model's init and data order). Medians over seeds; 'epochs to reach' counts a seed that never got there as "
        f"infinite. Random search's final best (median) is {pct(s['target'])} %. For one seed, random search, the TPE script "
        f"and hpsearch's TPE rows draw their first {n} trials alike (Optuna's TPE samples its start-up trials with "
        f"RandomSampler(seed)), so their curves coincide until pruning or the model sets them apart.",
        f"Goal 1, hpsearch reaches random's final best with ≤ 1/3 of its epochs: {met[g1['met']]}: "
        + (
            f"{g1['epochs']:g} epochs, {g1['share_of_random']:.2f} of random's {rows['random']['epochs_spent']:g}. "
            if g1["epochs"] is not None
            else f"the median seed did not reach it within {setup.budget} epochs. "
        )
        + "Other rows, median epochs to get there: "
        + ", ".join(
            f"{m} {'never' if r['epochs_to_random_best'] is None else format(r['epochs_to_random_best'], 'g')}"
            for m, r in rows.items()
            if m not in ("random", "hpsearch")
        )
        + f". Why: TPE proposes its first trial after {n} start-up trials, which took {hp['tpe_startup_epochs']:g} of the "
        f"{setup.budget} epochs (median); until then hpsearch is random search with pruning"
        + (
            f", and the median pruner runs its first {defaults['pruner_startup_trials']} trials unpruned "
            f"({defaults['pruner_startup_trials'] * setup.epochs} epochs). "
            if defaults["pruner_startup_trials"] is not None
            else f" ({defaults.get('pruner', 'its pruner')} from the first trial). "
        )
        + f"Afterwards it pruned {hp['pruned_after_startup']:g} of {hp['trials_after_startup']:g} trials (median).",
        f"Goal 2, test accuracy ≥ tutorial default + 1.5 points: {met[g2['met']]}: "
        + ("-" if g2["gain_points"] is None else f"{g2['gain_points']:+.2f} points")
        + f" ({pct(hp['test_acc'])} % vs {pct(dflt['test_acc'])} %, medians of {seeds} retrains). Every search's retrained "
        f"best lies at {pct(min(searched))}-{pct(max(searched))} %, so the gain comes from the space more than from "
        f"which search found it; schedules of the best configs: {schedules(rows, dflt)} (the default's is constant).",
    ]
    pr = g3["hpsearch"]
    out.append(
        f"Goal 3, with pruning within 0.3 points of the unpruned TPE script's final best using ≤ 1/3 of its epochs: {met[g3['met']]}: "
        + (
            f"hpsearch defaults got there in {pr['epochs_to_within']:g} epochs ({pr['share']:.2f} of "
            f"{rows['optuna_tpe']['epochs_spent']:g})"
            if pr["epochs_to_within"] is not None
            else f"hpsearch defaults did not get there within {setup.budget} epochs (median seed)"
        )
        + f", final best {pr['final_gap_points']:+.2f} points vs the script; "
        + "; ".join(
            f"{METHODS[m]}: "
            + (f"{g3[m]['epochs_to_within']:g} epochs ({g3[m]['share']:.2f})" if g3[m]["epochs_to_within"] is not None else "not within")
            + f", final {g3[m]['final_gap_points']:+.2f} points"
            for m in g3
            if m in rows and m != "hpsearch"
        )
        + "."
    )
    out.append(
        "Retrains: each search's best config (best final val_acc of a completed trial within the budget) trained on all "
        f"54,000 train-split images for {setup.epochs} epochs, scored on the 10,000 test images; identical configs are "
        f"retrained once. The tutorial default is retrained the same way; its curve is one {setup.budget}-epoch run on the "
        f"12k subset, whose best epoch was {', '.join(str(e) for e in dflt['best_epoch_per_seed'])} by seed."
    )
    top = s["top"]
    if top["random_trials_within_0_3_points"] is not None:
        out.append(
            f"The top of this space is wide: {100 * top['random_trials_within_0_3_points']:.0f} % of random search's completed "
            f"trials are within 0.3 points of its final best, and the best single trial of any search reached "
            f"{pct(top['best_trial_any_search'])} %. The best of {setup.budget // setup.epochs} random draws is already near what "
            f"a {setup.epochs}-epoch MLP gets here, which leaves a sampler or a pruner little to gain over random search within this budget."
        )
    out.append(
        "Noise: 5,000 validation images give a binomial standard error of ~0.45 points on one accuracy near 88 %. All methods "
        "are scored on the same images, so differences between them are less noisy than that, but picking the best of N trials "
        "picks up part of it; the retrained test accuracy does not."
    )
    out.append(
        "Wall time: two searches side by side, one thread each, on 2 cores shared with other jobs; Ray alone afterwards, "
        f"two one-thread trials at a time, its start-up included ({setup.ray_trials} trials, "
        f"{rows['ray_asha']['epochs_run']:g} epochs run (median), those ending past the budget not counted)."
        if "ray_asha" in rows
        else "Wall time: two searches side by side, one thread each, on 2 cores shared with other jobs. Ray not run."
    )
    note = lrfind_note(rows, s["target"], setup.budget, s["curves"])
    return out + ([note] if note else [])


def lrfind_note(rows: dict[str, Any], target: float, budget: int, curves: dict[str, Any]) -> str | None:
    """Did lr-find's ranges make random search's final best cheaper to reach? Either way, in numbers."""
    lf = rows.get("lrfind")
    if lf is None:
        return None

    def versus(other: str) -> str:
        a, b = lf["epochs_to_random_best"], rows[other]["epochs_to_random_best"] if other in rows else None
        seeds = f"per seed {epochs_text(lf).split(' ', 1)[1]} vs {epochs_text(rows[other]).split(' ', 1)[1]}" if other in rows else ""
        if a is None:
            return f"not cheaper than {other} ({'never' if b is None else format(b, 'g')} epochs; {seeds})"
        if b is None:
            return f"cheaper than {other}, which did not reach it (median seed; {seeds})"
        return f"{'cheaper' if a < b else 'not cheaper'} than {other} (median {a:g} vs {b:g} epochs, {a / b:.2f}x; {seeds})"

    marks = [budget // 3, 2 * budget // 3, budget]  # epochs at which to compare best-so-far, seed by seed
    paired = [
        f"{e} epochs: {', '.join(pct(best_at(c, e)) for c in curves['lrfind'])} vs {', '.join(pct(best_at(c, e)) for c in curves['hpsearch'])}"
        for e in marks
    ]
    seeds = len(curves["lrfind"])
    ahead = {e: sum(best_at(a, e) > best_at(b, e) for a, b in zip(curves["lrfind"], curves["hpsearch"], strict=True)) for e in marks}
    anytime = (
        "Best val so far at equal epochs (lr-find's cost included), seed by seed, lr-find's row vs hpsearch defaults: "
        + "; ".join(paired)
        + f" % (ahead in {', '.join(f'{ahead[e]} of {seeds} at {e}' for e in marks)}). "
        if "hpsearch" in curves and len(curves["hpsearch"]) == len(curves["lrfind"])
        else ""
    )
    ranges = "; ".join(
        f"seed {i}: "
        + ", ".join(f"{o} [{x['suggested'][0]:.3g}, {x['suggested'][1]:.3g}] ({x['steps']} steps, {x['stop']})" for o, x in found.items())
        for i, found in enumerate(lf.get("lr_find_per_seed", []))
        if found
    )
    return (
        f"lr-find row: `hpsearch lr-find` on the benchmark spec with each seed, then hpsearch's defaults on the narrowed "
        f"spec; lr-find's training steps count first, {', '.join(map(str, lf.get('lr_find_epochs_per_seed', [])))} epochs "
        f"by seed (rounded up), so the search had the rest of the {budget}-epoch budget. Suggested lr ranges: "
        f"{ranges} (the spec's: sgd [0.003, 0.5], adamw [0.0001, 0.01]). Reaching random search's final best "
        f"({pct(target)} %), epochs per seed {epochs_text(lf)}: {versus('hpsearch')}; {versus('random')}. Final best "
        f"{pct(lf['final_best_val_acc'])} % (hpsearch defaults {pct(rows['hpsearch']['final_best_val_acc']) if 'hpsearch' in rows else '-'} %), "
        f"retrained test {pct(lf['test_acc'])} % (hpsearch defaults {pct(rows['hpsearch']['test_acc']) if 'hpsearch' in rows else '-'} %). "
        + anytime
        + "Caveats: lr-find's suggestion rule (3x the min-loss lr, /30) was chosen after seeing lr-find's curves on this "
        "spec next to the lrs of the earlier searches' best configs, so this row is not a blind test of the rule; with 3 seeds "
        "a few epochs either way is within noise. Its search wall time was measured at another time and machine load than "
        "the other rows (below): compare epochs, not seconds."
    )


def merge_rows(path: Path, runs: list[Run], setup: Setup, seeds: int, started: float) -> None:
    """--methods without random search: add these rows to the committed result of the same setup, the other rows kept
    (every search is deterministic, so they stay valid); the table, notes and plot are rebuilt from the merged rows."""
    from common import command, load_average, write_result

    old = json.loads(path.read_text())
    f = old["figures"]
    if (f["budget_epochs"], f["epochs_per_trial"], f["seeds"]) != (setup.budget, setup.epochs, seeds) or old["smoke"]:
        raise SystemExit(f"{path}: another setup (budget, epochs, seeds, smoke); run every method instead of --methods")
    target = f["random_final_best"]
    s = summarize(runs, setup, f["hpsearch_defaults"]["sampler_startup_trials"], target)
    f["methods"].update(s["rows"])
    f["curves"].update(s["curves"])
    merged = {"target": target, "rows": f["methods"], "curves": f["curves"]}
    plot(merged, setup, path.parent / f["png"])
    added = {
        "methods": sorted(s["rows"]),
        "command": command(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "duration_s": round(time.perf_counter() - started, 1),
        "load_avg_1_5_15": load_average(),
        "cpu_s_children": round(sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), k) for k in ("ru_utime", "ru_stime"))),
    }
    prev = next((x for x in f.get("added_later", []) if x["methods"] == added["methods"]), None)
    if prev and prev["command"] == added["command"] and "--keep" in added["command"]:  # the kept searches, merged again
        added = {**prev, "merged_again": added["date"]}
    f["added_later"] = [x for x in f.get("added_later", []) if x["methods"] != added["methods"]] + [added]
    notes = [n for n in old["notes"] if not n.startswith(("lr-find row:", "Rows added later:"))]
    notes += [
        n
        for n in [lrfind_note(f["methods"], target, setup.budget, f["curves"])]
        + [
            "Rows added later: "
            + "; ".join(
                f"{', '.join(x['methods'])} by `{x['command']}` at {x['date']} ({x['duration_s']:.0f} s wall, load average "
                f"{x['load_avg_1_5_15']}); the other rows are from the run named above"
                for x in f["added_later"]
            )
        ]
        if n
    ]
    write_result(
        path.parent,
        "search_quality_live",
        old["title"],
        headline=old["headline"],
        smoke=False,
        goal=old["goal"],
        goal_met=old["goal_met"],
        figures=f,
        table=table(merged),
        notes=notes,
    )
    result = json.loads(path.read_text())  # write_result stamps this command, date and machine: the first run's stay
    result.update({k: old[k] for k in ("command", "date", "duration_s", "machine")})
    path.write_text(json.dumps(result, indent=2) + "\n")


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--budget", type=int, default=72, help="epochs per search (default 72: 12 full trials)")
    p.add_argument("--epochs", type=int, default=6, help="epochs per trial and per retrain")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2, help="searches side by side, each its own interpreter (1: all in this process)")
    p.add_argument("--keep", type=Path, help="keep each search's result in this folder and reuse it when run again")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE,...",
        help="one more hpsearch row with these --set values, e.g. startup5:sampler.startup_trials=5 (repeatable)",
    )
    p.add_argument(
        "--methods",
        type=lambda text: text.split(","),
        help=f"comma-separated subset of {','.join(METHODS)} (default all); without random search, the rows are merged "
        "into the committed result of the same setup (--out/search_quality_live.json), the other rows kept",
    )
    p.add_argument("--child", help=argparse_suppress())
    p.add_argument("--seed", type=int, default=0, help=argparse_suppress())
    p.add_argument("--result", type=Path, help=argparse_suppress())
    p.add_argument("--retrains", type=Path, help=argparse_suppress())  # retrain results shared by the children
    args = p.parse_args(argv)
    os.environ.update({k: v for k, v in ENV.items() if k == "OMP_WAIT_POLICY"})  # for what this process starts
    setup = setup_for(args.smoke, args.budget, args.epochs)
    for variant in args.variant:
        name, _, sets = variant.partition(":")
        METHODS[name], OVERRIDES[name] = f"hpsearch, {sets.replace(',', ', ')}", sets.split(",")
    if args.child:
        tmp = args.result.with_suffix(".partial")
        tmp.write_text(json.dumps(asdict(run_method(args.child, args.seed, setup, args.retrains))))
        tmp.replace(args.result)
        return
    started = time.perf_counter()
    if args.smoke:
        args.seeds, args.jobs = 1, 1
    unknown = set(args.methods or []) - set(METHODS)
    if unknown:
        p.error(f"--methods: unknown {', '.join(sorted(unknown))} (known: {', '.join(METHODS)})")
    with tempfile.TemporaryDirectory() as tmp:
        args.retrains = args.keep / "retrains" if args.keep else Path(tmp)
        runs = run_all(args, setup)
    if args.methods and "random" not in args.methods and not args.smoke:
        merge_rows(args.out / "search_quality_live.json", runs, setup, args.seeds, started)
        return
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    defaults = hpsearch_defaults()
    s = summarize(runs, setup, defaults["sampler_startup_trials"])
    g = goals(s, setup)
    args.out.mkdir(parents=True, exist_ok=True)
    plot(s, setup, args.out / "search_quality_live.png")
    hp, rows = s["rows"]["hpsearch"], s["rows"]
    for m in ("optuna_tpe", "hpsearch", "hyperband"):  # Optuna's TPESampler default startup is hpsearch's default too
        rows[m]["tpe_startup_epochs"] = startup_epochs([r for r in runs if r.method == m], defaults["sampler_startup_trials"])
    figures = {
        "budget_epochs": setup.budget,
        "epochs_per_trial": setup.epochs,
        "seeds": args.seeds,
        "jobs": args.jobs,
        "random_final_best": s["target"],
        "top_of_space": s["top"],
        "hpsearch_defaults": defaults,
        "methods": rows,
        "goals": g,
        "curves": s["curves"],
        "png": "search_quality_live.png",
        "cpu_s_children": round(children.ru_utime + children.ru_stime),  # the search processes; Ray's workers are not its children
    }
    headline = (
        f"hpsearch defaults: best val {pct(hp['final_best_val_acc'])} % vs random {pct(s['target'])} % in {setup.budget} epochs, "
        f"random's best reached in {hp['epochs_to_random_best'] or 'never'}"
        f"{'' if hp['epochs_to_random_best'] is None else ' epochs'}; test "
        + ("-" if g["test_gain"]["gain_points"] is None else f"{g['test_gain']['gain_points']:+.2f}")
        + " points over the tutorial default"
    )
    write_result(
        args.out,
        "search_quality_live",
        "Search quality on Fashion-MNIST (same epoch budget)",
        headline=headline,
        smoke=args.smoke,
        goal="hpsearch defaults reach random's final best with ≤ 1/3 of its epochs; test acc ≥ tutorial default + 1.5 points; "
        "pruning: ≤ 1/3 of the epochs, best within 0.3 points",
        goal_met=None if args.smoke else all(g[k]["met"] for k in g),
        figures=figures,
        table=table(s),
        notes=notes(s, g, setup, defaults, args.seeds),
        started=started,
    )


def argparse_suppress() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
