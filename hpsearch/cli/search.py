"""Searching: init, run, worker, validate, lr-find."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.base.errors import UserError
from hpsearch.cli.args import (
    add_resume_anyway,
    add_scale_args,
    add_spec_args,
    check_warm_start,
    ending,
    load,
    positive_float,
    positive_int,
    resume_anyway,
)
from hpsearch.spec.registry import BACKENDS

if TYPE_CHECKING:
    from hpsearch.study.summary import Summary


def cmd_run(args: argparse.Namespace) -> int:

    spec = load(args, prepare=True)
    check_warm_start(spec)
    resume_anyway(spec, args)
    summary: Summary = importlib.import_module(BACKENDS[spec.backend].module).run(spec, quiet=args.quiet)
    imported = f", {summary.imported} imported" if summary.imported else ""
    print(f"{summary.study}: {summary.finished} finished ({summary.pruned} pruned), {summary.failed} failed{imported}; best {summary.best}")
    print(f"storage {summary.storage}; TensorBoard: tensorboard --logdir {spec.study_dir}")
    return ending(summary)


def cmd_worker(args: argparse.Namespace) -> int:
    spec = load(args)
    if spec.backend != "optuna":  # before the objective's prepare hook (a download) or any write
        raise UserError(
            f"{spec.path}: backend: {spec.backend}: `hpsearch worker` joins an Optuna study; a {spec.backend} "
            f"study is scheduled by its own cluster: run `hpsearch run {spec.path}` (ray.address joins an existing cluster), "
            f"or add --set backend=optuna to run Optuna workers on this study"
        )
    spec = load(args, prepare=True)
    check_warm_start(spec)
    resume_anyway(spec, args)
    from hpsearch.engine.optuna import machine_salt, run
    from hpsearch.study.rerun_queue import joined

    spec = joined(spec)  # --study NAME-promote / NAME-audit: that study's queued runs, pruner off
    summary = run(spec, quiet=args.quiet, seed_salt=machine_salt())
    print(
        f"{summary.study}: {summary.finished} finished ({summary.pruned} pruned), {summary.failed} failed; "
        f"this worker ran {summary.ran}; best {summary.best}"
    )
    return ending(summary)


def cmd_validate(args: argparse.Namespace) -> int:
    from hpsearch.tools.describe import validate_spec

    spec = load(args)
    print(validate_spec(spec, samples=args.samples))
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from hpsearch.tools.init_spec import init

    command = args.script[1:] if args.script[:1] == ["--"] else args.script
    print(init(command, Path(args.out), force=args.force, probe_s=args.probe))
    return 0


def cmd_lr_find(args: argparse.Namespace) -> int:
    from hpsearch.tools import lrfind

    spec = load(args)
    targets = lrfind.targets(spec)  # a spec lr-find cannot test fails here, before any training
    if args.apply:
        lrfind.check_apply(spec, Path(args.apply), targets)
    print(f"{spec.study}: lr range test of {len(targets)} optimizer option(s), other parameters at their middle")
    curves = lrfind.run(spec, args.steps, Path(args.out) if args.out else None)
    print("\n".join(lrfind.table(curves)))
    print("plots: " + ", ".join(str(c.png) for c in curves))
    if args.apply:
        print(f"wrote {lrfind.write(spec, curves, Path(args.apply))}; search it: hpsearch run {args.apply}")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "init",
        help="write a starter spec for a training script, from its --help (and a short probe run)",
        description=(
            "Reads the script's options from its --help (argparse, click, typer, Hydra): names, defaults, types, booleans "
            "(flags without a value, --no- pairs). Writes a commented spec: the flag style the help shows, the flags as fixed: "
            "at their defaults, search ranges for names it recognises (lr, learning_rate, weight_decay, batch_size, dropout, "
            "momentum, warmup*), and the metric to search. --probe S runs the script as it is for S seconds to see which "
            "metrics and which step it prints; the direction is guessed from the metric's name."
        ),
        usage="hpsearch init -o SPEC [--force] [--probe S] -- COMMAND [ARGS ...]",
    )
    p.add_argument("-o", "--out", required=True, metavar="SPEC", help="the spec file to write (never overwritten without --force)")
    p.add_argument("--force", action="store_true", help="overwrite SPEC if it exists")
    p.add_argument("--probe", type=positive_float, metavar="S", help="run the script for S seconds to see its metrics and step")
    p.add_argument("script", nargs=argparse.REMAINDER, metavar="COMMAND", help="the training command, after --: python train.py [args]")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("run", help="run (or resume) the study a spec describes")
    add_spec_args(p)
    p.add_argument("--trials", type=positive_int, help="total finished trials the study aims for")
    p.add_argument("--timeout", type=positive_float, help="seconds of wall time for this invocation")
    p.add_argument("--max-failures", type=positive_int, help="stop after this many failed trials in a row")
    p.add_argument("--backend", choices=list(BACKENDS), help="override the spec's backend")
    add_scale_args(p)
    p.add_argument("--address", help="ray backend: 'auto' or HOST:PORT of a running Ray cluster (default: start a local one)")
    p.add_argument("--quiet", action="store_true", help="plain lines, no per-epoch output")
    add_resume_anyway(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("validate", help="check a spec; print the space and a few sampled configs")
    add_spec_args(p)
    p.add_argument(
        "--samples",
        type=positive_int,
        default=20,
        help="sampled configs to check with the objective's validate hook (default 20; the first 3 are printed)",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "lr-find",
        help="learning-rate range test per optimizer option: suggested lr bounds, a plot each, --apply writes a narrowed spec",
        description=(
            "Smith's lr range test, per optimizer option of the space, the other parameters at their middle (log-middle of a "
            "log range, middle of a linear one, median of numeric choices, first of other choices). The lr rises exponentially "
            "from the option's low/10 to its high*10; the test stops when the smoothed loss exceeds 4x its minimum. Suggested: "
            "high = 3x the lr at the min smoothed loss (never above the top lr tested, half of it if it diverged there), "
            "low = high / 30. "
            "Cost: per option at most --steps training steps and no validation pass; by default one epoch of the training "
            "split (a tiny dataset's epoch is repeated up to 100 steps, never past one trial's steps): about 1/E of an "
            "E-epoch trial per option. Built-in objective only."
        ),
    )
    add_spec_args(p)
    p.add_argument(
        "--steps", type=positive_int, help="optimizer steps per option (default: one epoch of the training split; see the cost above)"
    )
    p.add_argument("--apply", metavar="OUT.yaml", help="write a new spec with the suggested lr ranges (never the input file)")
    p.add_argument("--out", help="folder for the PNGs (default: <output>/<study>/lr-find)")
    p.set_defaults(func=cmd_lr_find)

    p = sub.add_parser("worker", help="join a study from this machine and run trials until its budget is spent")
    add_spec_args(p)
    add_scale_args(p)
    p.add_argument("--timeout", type=positive_float, help="seconds of wall time for this worker")
    p.add_argument("--quiet", action="store_true", help="plain lines, no per-epoch output")
    add_resume_anyway(p)
    p.epilog = "every worker needs the same spec and a shared --storage, e.g. postgresql://user:pw@db-host/hpsearch"
    p.set_defaults(func=cmd_worker)
