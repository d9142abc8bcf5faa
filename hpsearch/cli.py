"""Command line: parse, load the spec, call one library function. Bad input exits 2 in one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from hpsearch.errors import UserError

RESUME_HINT = "run the same command again to resume"


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
    p.add_argument("--set", dest="overrides", action="append", type=key_value, default=[], metavar="KEY.PATH=VALUE",
                   help="override a spec value, e.g. --set budget.trials=10 --set fixed.epochs=3 (repeatable)")


def spec_overrides(args: argparse.Namespace) -> list[str]:
    flags = {"storage": "storage", "study": "study", "output": "output", "trials": "budget.trials",
             "timeout": "budget.timeout", "max_failures": "budget.max_failures", "backend": "backend"}
    extra = [f"{key}={getattr(args, name)}" for name, key in flags.items() if getattr(args, name, None) is not None]
    return list(args.overrides) + extra


def load(args: argparse.Namespace) -> Any:
    from hpsearch.spec import load_spec

    return load_spec(args.spec, spec_overrides(args))


# ---------------------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    from hpsearch.backends import get_backend

    spec = load(args)
    summary = get_backend(spec.backend).run(spec, quiet=args.quiet)
    print(f"{summary.study}: {summary.finished} finished ({summary.pruned} pruned), {summary.failed} failed; best {summary.best}")
    print(f"storage {summary.storage}; TensorBoard: tensorboard --logdir {spec.study_dir}")
    if summary.stopped_early:
        print(f"stopped early: {summary.stopped_early}", file=sys.stderr)
        return 1
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from hpsearch.describe import describe_spec

    spec = load(args)
    print(describe_spec(spec, samples=args.samples))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="hpsearch", description="Hyperparameter search for PyTorch training.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("run", help="run (or resume) the study a spec describes")
    add_spec_args(p)
    p.add_argument("--trials", type=positive_int, help="total finished trials the study aims for")
    p.add_argument("--timeout", type=positive_float, help="seconds of wall time for this invocation")
    p.add_argument("--max-failures", type=positive_int, help="stop after this many failed trials in a row")
    p.add_argument("--backend", choices=["optuna", "ray"], help="override the spec's backend")
    p.add_argument("--quiet", action="store_true", help="plain lines, no per-epoch output")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("validate", help="check a spec; print the space and a few sampled configs")
    add_spec_args(p)
    p.add_argument("--samples", type=int, default=3, help="how many sampled configs to print")
    p.set_defaults(func=cmd_validate)

    # -- study results and training runs (best, trials, export, train, promote, report, dashboard) --

    # -- scale-out (worker) --

    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except UserError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; running trials were marked failed ({RESUME_HINT})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
