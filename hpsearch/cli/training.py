"""Training and re-runs: train, profile, promote, audit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hpsearch.base.text import fmt
from hpsearch.cli.args import add_rerun_args, add_set, add_spec_args, load, positive_int


def cmd_train(args: argparse.Namespace) -> int:
    from hpsearch.reading import export as exporting
    from hpsearch.tools import final_run as training

    doc = training.load_run_config(args.config, args.overrides)
    training.set_processes(doc, args.config, args.processes, args.devices)
    run_dir = Path(args.out) if args.out else exporting.default_run_dir(doc)
    try:
        result = training.train(doc, run_dir, fresh=args.fresh, quiet=args.quiet)
    except KeyboardInterrupt:
        print(f"\ninterrupted; run the same command again to resume from the last checkpoint in {run_dir}", file=sys.stderr)
        return 130
    if result.state != "completed":
        print(f"training {result.reason} after {result.epochs} epochs; see {run_dir}", file=sys.stderr)
        return 1
    print("final: " + " ".join(f"{k}={fmt(v)}" for k, v in result.metrics.items()))
    if "best_epoch" in result.metrics:  # early_stopping: say which weights model.pt holds
        best, stopped = int(result.metrics["best_epoch"]), int(result.metrics["stopped_epoch"])
        weights = ", as are model.pt's weights (model_last.pt: the last epoch's)" if (run_dir / "model_last.pt").exists() else ""
        print(f"early stopping: stopped after epoch {stopped}; the final metrics are epoch {best}'s{weights}")
    print(
        f"wrote {run_dir / 'metrics.json'}"
        + (f" and {run_dir / 'model.pt'}" if (run_dir / "model.pt").exists() else "")
        + f"; TensorBoard: tensorboard --logdir {run_dir}"
    )
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from hpsearch.reading import export as exporting
    from hpsearch.tools import profile

    variants = profile.parse_compare(args.compare) if args.compare else None  # bad text: one line before any work
    source = profile.resolve(args.target, args.trial)
    print(f"profiling {source.chosen}: {profile.config_text(source.config)}")
    if variants is not None:
        print(f"timing {args.steps} steps of each variant (after one warm-up step):")
        print(profile.compare_text(profile.compare(source, variants, args.steps)))
        return 0
    result = profile.profile_config(source, args.steps, Path(args.out) if args.out else None)
    print(f"{args.steps} steps profiled (after one warm-up step); host time per phase:")
    print(profile.profile_text(result))
    trace, logdir = exporting.shown(result.trace), exporting.shown(result.trace.parent.parent)  # the plugin reads <logdir>/<run>/
    print(f"trace: {trace} (open in ui.perfetto.dev or chrome://tracing; TensorBoard: tensorboard --logdir {logdir})")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    from hpsearch.reading import export as exporting
    from hpsearch.reading import results
    from hpsearch.reruns import promote as promoting

    args.overrides, config_sets = exporting.split_overrides(args.overrides)
    spec = load(args)
    out = Path(args.out) if args.out else None
    done = promoting.promote(spec, args.top, args.seeds, args.seed_base, config_sets, out, quiet=args.quiet, queue_only=args.queue_only)
    if done is None:
        print("queued; once workers have run them, run this command again (without --queue-only) to collect and export")
        return 0
    header, rows = promoting.promote_table(done.candidates, done.metric, done.winner)
    results.print_table(header, rows, title=f"{spec.study}: {len(done.candidates)} configs x {args.seeds} seeds (* = promoted)")
    w = done.winner
    print(f"promoted trial {w.trial.number}: {done.metric} {fmt(w.mean)} ± {fmt(w.std)} over {len(w.values)} seeds -> {done.out}")
    print(f"train it: hpsearch train {done.out}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from hpsearch.reruns import audit

    spec = load(args)
    doc = audit.audit(spec, args.pruned, args.seeds, quiet=args.quiet, queue_only=args.queue_only)
    if doc is not None:
        audit.print_result(doc)
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("train", help="train an exported config (no pruning, checkpoints, resumes when run again)")
    p.add_argument("config", help="the exported config (hpsearch export SPEC -o best.yaml)")
    p.add_argument("-o", "--out", help="run folder (default: <output>/train/<study>-trial<N>/)")
    add_set(p, "KEY=VALUE", "override a config value, e.g. --set epochs=50 (repeatable)")
    p.add_argument("--fresh", action="store_true", help="discard the run folder's checkpoint and results and start over")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    ranks = p.add_mutually_exclusive_group()
    ranks.add_argument("--processes", type=positive_int, help="data-parallel CPU processes (gloo); sets config processes: N")
    ranks.add_argument("--devices", type=positive_int, help="data-parallel CUDA GPUs, one process each (NCCL)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("profile", help="profile K training steps of a config: time per phase, top operators, memory, a trace")
    p.add_argument("target", help="a spec (its best trial, or --trial N) or an exported config (best.yaml)")
    p.add_argument("--trial", type=int, help="with a spec: this trial's config (default: the best trial)")
    p.add_argument("--steps", type=positive_int, default=20, help="optimizer steps to profile or time (default 20)")
    p.add_argument("-o", "--out", help="folder for the trace (default: <study>/profile or <output>/profile/<run>)")
    p.add_argument(
        "--compare",
        nargs="+",
        metavar="KEY=V1,V2",
        help="time every combination of these config values instead, e.g. --compare amp=off,bf16 channels_last=false,true",
    )
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("promote", help="re-run the top configs with several seeds; export the best mean")
    add_spec_args(p)
    p.add_argument("--top", type=positive_int, default=3, help="how many of the best configs to re-run (default 3)")
    p.add_argument("--seeds", type=positive_int, default=3, help="seeds per config (default 3)")
    p.add_argument("--seed-base", type=int, default=0, help="the seeds are BASE, BASE+1, ... (config key 'seed')")
    p.add_argument("-o", "--out", help="file to export the winner to (default: <output>/<study>/promoted.yaml)")
    add_rerun_args(p)
    p.epilog = "--set KEY=VALUE with a key that is not a spec key overrides every re-run's config, e.g. --set epochs=50"
    p.set_defaults(func=cmd_promote)

    p = sub.add_parser("audit", help="did pruning kill a winner? re-run the best-ranked pruned trials to the end")
    add_spec_args(p)
    p.add_argument("--pruned", type=positive_int, default=5, help="pruned trials to re-run: those ranked best when pruned (default 5)")
    p.add_argument("--seeds", type=positive_int, default=1, help="runs per pruned trial: its own config, then seed+1, ... (default 1)")
    add_rerun_args(p)
    p.set_defaults(func=cmd_audit)
