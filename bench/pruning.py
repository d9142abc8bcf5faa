"""Pruning: epochs trained and best val accuracy with hyperband and median pruning vs none.

spaces/quickstart.yaml's space and fixed settings (digits, resnet8), --trials trials of
--epochs epochs each, one study per (pruner, sampler seed). For each seed the pruners run
back to back (order alternating), so they share the machine's load. "median" and
"hyperband" use quickstart's pruner settings (startup_trials 4, warmup_epochs 2, which
hyperband takes as its min_resource); the "eager" variants decide from the first epoch:
median with startup_trials 2 and warmup_epochs 0, and successive halving (asynchronous,
min_resource 1, reduction factor 4).

    .venv/bin/python bench/pruning.py                      # 30 trials x 10 epochs x 3 seeds
    .venv/bin/python bench/pruning.py --smoke
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, Timer, interleave, parser, ratio, write_result

PRUNERS: dict[str, list[str]] = {  # name -> spec overrides
    "none": ["pruner.name=none"],
    "median": ["pruner.name=median"],
    "hyperband": ["pruner.name=hyperband"],
    "median_eager": ["pruner.name=median", "pruner.startup_trials=2", "pruner.warmup_epochs=0"],
    "sha_eager": ["pruner.name=successive_halving", "pruner.warmup_epochs=0"],
}


def run_study(pruner: str, seed: int, trials: int, epochs: int, folder: Path, extra: list[str]) -> dict[str, Any]:
    import optuna

    from hpsearch.backends import get_backend
    from hpsearch.spec import load_spec

    overrides = [
        f"study=prune-{pruner}-{seed}", f"output={folder}", f"budget.trials={trials}", "budget.timeout=36000",
        f"fixed.epochs={epochs}", *PRUNERS[pruner], f"sampler.seed={seed}", *extra,
    ]
    spec = load_spec(ROOT / "spaces" / "quickstart.yaml", overrides)
    with Timer() as t, contextlib.redirect_stdout(io.StringIO()):
        get_backend(spec.backend).run(spec, quiet=True)
    study = optuna.load_study(study_name=spec.study, storage=spec.storage_url)
    done = [tr for tr in study.get_trials(deepcopy=False) if tr.state.is_finished()]
    epochs_trained = sum(len(tr.intermediate_values) for tr in done)
    completed = [tr for tr in done if tr.state == optuna.trial.TrialState.COMPLETE]
    return {
        "wall_s": t.s,
        "epochs_trained": epochs_trained,
        "best_val_acc": max((tr.value for tr in completed), default=float("nan")),
        "pruned": sum(tr.state == optuna.trial.TrialState.PRUNED for tr in done),
        "completed": len(completed),
    }


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args(argv)
    started = time.perf_counter()
    # 1 thread, not quickstart's 2: on a shared machine 2 spin-waiting OpenMP threads run 5-10x slower at random
    extra = ["fixed.threads=1"]
    if args.smoke:
        args.trials, args.epochs, args.seeds = 2, 1, 1
        extra += ["fixed.model=mlp"]
    with tempfile.TemporaryDirectory() as tmp:
        names = ["none", "median", "hyperband"] if args.smoke else list(PRUNERS)
        runs = interleave({name: (lambda r, name=name: run_study(name, r, args.trials, args.epochs, Path(tmp), extra)) for name in names}, args.seeds)

    def mean(name: str, key: str) -> float:
        return sum(m[key] for m in runs[name]) / len(runs[name])

    base_epochs, base_acc = mean("none", "epochs_trained"), mean("none", "best_val_acc")
    figures: dict[str, Any] = {"trials": args.trials, "epochs": args.epochs, "seeds": args.seeds}
    rows, met = [], []
    for name in runs:
        share = ratio(mean(name, "epochs_trained"), base_epochs)
        diff = 100 * (mean(name, "best_val_acc") - base_acc)
        figures[name] = {
            "epochs_trained": mean(name, "epochs_trained"), "epochs_share": share, "best_val_acc": mean(name, "best_val_acc"),
            "acc_diff_points": diff, "wall_s": mean(name, "wall_s"), "pruned": mean(name, "pruned"),
            "per_seed": runs[name],
        }
        rows.append([name, f"{mean(name, 'epochs_trained'):.0f}", f"{share:.2f}", f"{mean(name, 'pruned'):.1f}",
                     f"{100 * mean(name, 'best_val_acc'):.2f}", f"{diff:+.2f}", f"{mean(name, 'wall_s'):.0f}"])
        if name != "none":
            met.append(share <= 1 / 3 and diff >= -0.5)
    notes = [
        (f"Means over sampler seeds 0..{args.seeds - 1}; each study {args.trials} trials x {args.epochs} epochs "
         f"(quickstart space, digits, resnet8, 1 torch thread). median, hyperband: quickstart's pruner settings "
         f"(startup_trials 4, warmup_epochs 2; hyperband min_resource 2, max_resource {args.epochs}, reduction factor 3); "
         f"median_eager: startup_trials 2, warmup_epochs 0; sha_eager: successive halving, min_resource 1, reduction factor 4."),
        ("With warmup_epochs 2 and startup_trials 4 the median pruner cannot go below "
         f"{(min(args.trials, 4) * args.epochs + max(args.trials - 4, 0) * min(3, args.epochs)) / (args.trials * args.epochs):.2f} of the epochs (4 full trials, the rest "
         "stopped at epoch 3 at the earliest)."),
        "best val acc: the best completed trial's final val_acc. The validation split has 144 images, so one image is 0.69 points.",
        "Goal met when a pruner trains at most 1/3 of the epochs of `none` with a best accuracy at most 0.5 points lower.",
    ]
    headline = "; ".join(
        f"{n}: {figures[n]['epochs_share']:.2f} of the epochs, best acc {figures[n]['acc_diff_points']:+.2f} points"
        for n in runs if n != "none"
    )
    write_result(
        args.out, "pruning", "Pruning: epochs trained vs best accuracy", headline=headline, smoke=args.smoke,
        goal="≤ 1/3 of the epochs of no pruning, best val accuracy within 0.5 points",
        goal_met=any(met) if not args.smoke else None, figures=figures,
        table={"columns": ["pruner", "epochs trained", "share of none", "pruned trials", "best val acc %", "vs none (points)", "wall s"], "rows": rows},
        notes=notes, started=started,
    )


if __name__ == "__main__":
    main()
