"""Command line: parse, load the spec, call one library function. Bad input exits 2 in one line.

Longer than 500 lines on purpose: every subcommand's argparse definition sits beside its thin
handler (parse, load the spec, call one library function), so one file shows the whole CLI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hpsearch.base.errors import StorageUnreachable, UserError
from hpsearch.base.text import fmt
from hpsearch.spec.registry import BACKENDS

if TYPE_CHECKING:
    from hpsearch.spec.loader import Spec
    from hpsearch.study.summary import Summary

RESUME_HINT = "run the same command again to resume"
RESUME_ANYWAY_FLAG = "--resume-anyway"


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def key_value(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key.path=value, got {text!r}")
    return text


def add_spec_args(p: argparse.ArgumentParser) -> None:
    """The spec is the handle; these flags override what it says."""
    p.add_argument("spec", help="the spec YAML file (spaces/*.yaml)")
    p.add_argument("--storage", help="study storage URL (default: sqlite file under the output folder)")
    p.add_argument("--study", help="study name (default: the spec's study:)")
    p.add_argument("--output", help="output folder (default: the spec's output:)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a spec value, e.g. --set budget.trials=10 --set fixed.epochs=3 (repeatable)",
    )


def spec_overrides(args: argparse.Namespace) -> list[str]:
    flags = {
        "storage": "storage.url",
        "study": "study",
        "output": "output",
        "trials": "budget.trials",
        "timeout": "budget.timeout",
        "max_failures": "budget.max_failures",
        "backend": "backend",
        "workers": "resources.workers",
        "gpus": "resources.gpus",
        "address": "ray.address",
    }
    extra = [f"{key}={getattr(args, name)}" for name, key in flags.items() if getattr(args, name, None) is not None]
    return list(args.overrides) + extra


def load(args: argparse.Namespace, prepare: bool = False) -> Spec:
    """The spec, its objective checked; ``prepare``: a study starts (the objective's prepare hook runs)."""
    from hpsearch.spec.loader import load_spec

    return load_spec(args.spec, spec_overrides(args), prepare=prepare)


# ---------------------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    import importlib

    spec = load(args, prepare=True)
    check_warm_start(spec)
    resume_anyway(spec, args)
    summary: Summary = importlib.import_module(BACKENDS[spec.backend].module).run(spec, quiet=args.quiet)
    imported = f", {summary.imported} imported" if summary.imported else ""
    print(f"{summary.study}: {summary.finished} finished ({summary.pruned} pruned), {summary.failed} failed{imported}; best {summary.best}")
    print(f"storage {summary.storage}; TensorBoard: tensorboard --logdir {spec.study_dir}")
    return ending(summary)


def check_warm_start(spec: Spec) -> None:
    """warm_start.study must be readable before the study is created (one line, nothing written)."""
    if spec.warm_start.study is not None:
        from hpsearch.study.warmstart import check_warm_start as check

        check(spec)


def resume_anyway(spec: Spec, args: argparse.Namespace) -> None:
    """--resume-anyway: the stored study takes this spec's definition (objective, metric, fixed values)."""
    if args.resume_anyway:
        from hpsearch.study.definition import adopt_definition

        changed = adopt_definition(spec)
        if changed:
            print(
                f"warning: {spec.study}: continuing with another definition ({RESUME_ANYWAY_FLAG}): {'; '.join(changed)}", file=sys.stderr
            )


def ending(summary: Summary) -> int:
    """The last lines of run/worker: the latest failure and its traceback file; why it stopped early (exit 1)."""
    if summary.last_failure:
        print(f"last failure: {summary.last_failure}")
    if not summary.stopped_early:
        return 0
    hint = "fix the objective, then" if summary.contract else "fix the cause, then"
    # A changed metric: is a changed study definition, which a plain rerun refuses: name the flag that takes it.
    more = f" (or fix the spec's metric: and add {RESUME_ANYWAY_FLAG})" if summary.contract else " (or raise --max-failures)"
    print(f"stopped early: {summary.stopped_early}; {hint} {RESUME_HINT}{more}", file=sys.stderr)
    return 1


def cmd_validate(args: argparse.Namespace) -> int:
    from hpsearch.tools.describe import validate_spec

    spec = load(args)
    print(validate_spec(spec, samples=args.samples))
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


# -- study results and training runs: commands --


def load_for_results(args: argparse.Namespace) -> Spec:
    """The spec without importing its objective: best/trials/report/dashboard only read the storage."""
    from hpsearch.spec.loader import load_spec

    return load_spec(args.spec, spec_overrides(args), check_objective=False)


def cmd_best(args: argparse.Namespace) -> int:
    from hpsearch.reading import results

    spec = load_for_results(args)
    study = results.load_study(spec)
    print(json.dumps(results.best_json(study, spec), indent=2) if args.json else results.best_text(study, spec))
    return 0


def cmd_trials(args: argparse.Namespace) -> int:
    from hpsearch.reading import results

    spec = load_for_results(args)
    study = results.load_study(spec)
    if args.json:
        print(json.dumps(results.trials_json(study, spec, args.sort), indent=2))
        return 0
    header, rows = results.trial_rows(study, spec, args.sort)
    if args.csv:
        sys.stdout.write(results.trials_csv(header, rows))
    else:
        results.print_table(header, rows, title=f"{study.study_name}: {len(rows)} trials")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from hpsearch.reading import export as exporting

    args.overrides, config_sets = exporting.split_overrides(args.overrides)
    spec = load(args)
    doc = exporting.export(spec, Path(args.out), args.trial, config_sets)
    src = doc["provenance"]
    shown = ", ".join(f"{m}={fmt(v)}" for m, v in (src["values"] or {}).items()) or src["reason"]
    print(f"exported trial {src['trial']} of {src['study']} ({shown}) to {args.out}")
    print(f"train it: hpsearch train {args.out}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from hpsearch.reading import export as exporting
    from hpsearch.tools import train_run as training

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


def cmd_report(args: argparse.Namespace) -> int:
    from hpsearch.plots import write_report
    from hpsearch.reading import results

    spec = load_for_results(args)
    out = Path(args.out) if args.out else spec.study_dir / "report"
    files = write_report(results.load_study(spec), out)
    print(f"wrote {len(files)} files to {out}; open {out / 'index.html'}")
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from hpsearch.reading.dashboard import start_dashboard

    spec = load_for_results(args)
    start_dashboard(spec.storage_url, host=args.host, port=args.port)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from hpsearch.reading.status_view import show

    show(load_for_results(args), watch=args.watch, as_json=args.json)
    return 0


def watch_seconds(text: str) -> float:
    """--watch [SECONDS]: a spec path right after --watch was meant as SPEC, so say where --watch goes."""
    if text.endswith((".yaml", ".yml")):
        raise argparse.ArgumentTypeError(f"expected seconds, got the spec {text!r}: put --watch after SPEC (hpsearch status SPEC --watch)")
    return positive_float(text)


# -- scale-out (worker): commands --


def add_resume_anyway(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        RESUME_ANYWAY_FLAG,
        dest="resume_anyway",
        action="store_true",
        help="continue the stored study although the spec changed its objective, metric or fixed: values",
    )


def gpu_list(text: str) -> str:
    """--gpus 0,2,3 -> the YAML list "[0, 2, 3]" for resources.gpus."""
    try:
        indices = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected device indices like 0,2,3, got {text!r}") from None
    return "[" + ", ".join(map(str, indices)) + "]"


def add_scale_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workers", type=positive_int, help="trial slots on this machine, each its own process (default: one per GPU share, 1 on CPU)"
    )
    p.add_argument("--gpus", type=gpu_list, help="device indices for the slots, e.g. 0,2,3 (default: all visible)")


def add_rerun_args(p: argparse.ArgumentParser) -> None:
    """promote and audit: fixed-config re-runs through the engine's slots (reruns.py)."""
    add_scale_args(p)
    p.add_argument("--queue-only", action="store_true", help="queue the re-runs for `hpsearch worker` processes and exit")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")


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
    from hpsearch.study.reruns import joined

    spec = joined(spec)  # --study NAME-promote / NAME-audit: that study's queued runs, pruner off
    summary = run(spec, quiet=args.quiet, seed_salt=machine_salt())
    print(
        f"{summary.study}: {summary.finished} finished ({summary.pruned} pruned), {summary.failed} failed; "
        f"this worker ran {summary.ran}; best {summary.best}"
    )
    return ending(summary)


def version_lines(verbose: int) -> list[str]:
    """``hpsearch --version``: this package's version; with -v also torch's, optuna's and ray's, read from
    their installed metadata (importing torch and ray would take seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    from hpsearch.base.version import __version__

    lines = [f"hpsearch {__version__}"]
    for name in ("torch", "optuna", "ray") if verbose else ():
        try:
            lines.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            lines.append(f"{name} (not installed)")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="hpsearch", description="Hyperparameter search for PyTorch training.")
    parser.add_argument("--version", action="store_true", help="print hpsearch's version and exit (-v: also torch, optuna and ray)")
    parser.add_argument("-v", dest="verbose", action="count", default=0, help="with --version: also the torch, optuna and ray versions")
    # not required: `hpsearch --version` has no command; main asks for one otherwise
    sub = parser.add_subparsers(dest="command", parser_class=Parser)

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

    # -- study results and training runs (best, trials, export, train, promote, report, dashboard) --

    p = sub.add_parser("best", help="the best trial (or the Pareto-optimal trials) of a study")
    add_spec_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_best)

    p = sub.add_parser("trials", help="every trial: state and reason, value, parameters, epochs, time, speed")
    add_spec_args(p)
    form = p.add_mutually_exclusive_group()
    form.add_argument("--csv", action="store_true", help="print CSV")
    form.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--sort", choices=["number", "value"], default="number", help="order of the rows (value: best first)")
    p.set_defaults(func=cmd_trials)

    p = sub.add_parser("export", help="write a trial's config as a self-contained training config (best.yaml)")
    add_spec_args(p)
    p.add_argument("-o", "--out", default="best.yaml", help="file to write (default: best.yaml)")
    p.add_argument("--trial", type=int, help="trial number (default: the best trial)")
    p.epilog = "--set KEY=VALUE with a key that is not a spec key overrides the trial's config, e.g. --set epochs=50"
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("train", help="train an exported config (no pruning, checkpoints, resumes when run again)")
    p.add_argument("config", help="the exported config (hpsearch export SPEC -o best.yaml)")
    p.add_argument("-o", "--out", help="run folder (default: <output>/train/<study>-trial<N>/)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set epochs=50 (repeatable)",
    )
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

    p = sub.add_parser("report", help="plots (HTML and PNG) and an index page for a study")
    add_spec_args(p)
    p.add_argument("-o", "--out", help="folder (default: <output>/<study>/report)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("dashboard", help="serve optuna-dashboard on the study's storage")
    add_spec_args(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080)
    p.set_defaults(func=cmd_dashboard)

    p = sub.add_parser("status", help="workers, running trials, recent failures, budget and ETA of a study (reads the storage only)")
    add_spec_args(p)
    p.add_argument(
        "--watch",
        nargs="?",
        const=5.0,
        type=watch_seconds,
        metavar="SECONDS",
        help="refresh every SECONDS (default 5) until Ctrl-C; put it after SPEC",
    )
    p.add_argument("--json", action="store_true", help="print JSON (with --watch: one document per line per refresh)")
    p.set_defaults(func=cmd_status)

    # -- scale-out (worker) --

    p = sub.add_parser("worker", help="join a study from this machine and run trials until its budget is spent")
    add_spec_args(p)
    add_scale_args(p)
    p.add_argument("--timeout", type=positive_float, help="seconds of wall time for this worker")
    p.add_argument("--quiet", action="store_true", help="plain lines, no per-epoch output")
    add_resume_anyway(p)
    p.epilog = "every worker needs the same spec and a shared --storage, e.g. postgresql://user:pw@db-host/hpsearch"
    p.set_defaults(func=cmd_worker)

    return parser


def main(argv: list[str] | None = None) -> int:
    from hpsearch.engine.devices import passive_waits

    passive_waits()  # OMP_WAIT_POLICY=PASSIVE before any command imports torch, unless the user set it
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print("\n".join(version_lines(args.verbose)))
        return 0
    if args.verbose:
        parser.error("-v goes with --version: hpsearch --version -v")
    if args.command is None:
        parser.error("the following arguments are required: command")
    func: Callable[[argparse.Namespace], int] = args.func
    studies = args.command in ("run", "worker", "promote", "audit")
    terminated: list[int] = []
    try:
        with _terminate_as_interrupt(terminated) if studies else contextlib.nullcontext():
            return func(args)
    except UserError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `hpsearch trials SPEC | head`: the reader left, which is fine
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more may reach the closed pipe at exit
        return 0
    except StorageUnreachable as exc:
        print(f"error: {exc}; running trials are retried first by the next run", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        from hpsearch.study.storage import redact

        # the command as typed, but a storage URL's password as *** (the user has it; logs must not)
        again = redact(shlex.join(["hpsearch", *(sys.argv[1:] if argv is None else argv)]))
        done = 'running trials were marked failed (reason "interrupted") and are retried first; ' if studies else ""
        print(f"\ninterrupted; {done}to resume, run the same command again: {again}", file=sys.stderr)
        return 143 if terminated else 130
    except Exception as exc:
        problem = _storage_error(exc)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _terminate_as_interrupt(terminated: list[int]) -> Iterator[None]:
    """SIGTERM (kill, a job scheduler) ends trials like Ctrl-C does: marked failed, never left RUNNING."""
    import signal
    import threading

    def handler(signum: int, frame: Any) -> None:
        terminated.append(signum)
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, handler)
    # Ctrl-C stops a run even when its shell started it with SIGINT ignored (`cmd &` in a script)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _storage_error(exc: Exception) -> str | None:
    """A database that cannot be reached or written: one line, password redacted, no traceback."""
    if type(exc).__module__.split(".")[0] not in ("sqlalchemy", "optuna", "psycopg2", "psycopg", "sqlite3"):
        return None
    from hpsearch.study.storage import redact

    if type(exc).__name__ not in ("OperationalError", "InterfaceError", "StorageInternalError", "DatabaseError"):
        return None
    cause = exc.__cause__ if type(exc).__name__ == "StorageInternalError" and exc.__cause__ else exc
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return f"storage: {redact(first)}"


if __name__ == "__main__":
    sys.exit(main())
