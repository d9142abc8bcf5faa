"""What every command group shares: the spec arguments and their overrides, loading the spec,
number parsers, and the last lines of a run."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, NoReturn

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


def add_set(p: argparse.ArgumentParser, metavar: str, help: str) -> None:
    """``--set KEY=VALUE``, repeatable, into ``args.overrides``."""
    p.add_argument("--set", dest="overrides", action="append", type=key_value, default=[], metavar=metavar, help=help)


def add_spec_args(p: argparse.ArgumentParser) -> None:
    """The spec is the handle; these flags override what it says."""
    p.add_argument("spec", help="the spec YAML file (spaces/*.yaml)")
    p.add_argument("--storage", help="study storage URL (default: sqlite file under the output folder)")
    p.add_argument("--study", help="study name (default: the spec's study:)")
    p.add_argument("--output", help="output folder (default: the spec's output:)")
    add_set(p, "KEY.PATH=VALUE", "override a spec value, e.g. --set budget.trials=10 --set fixed.epochs=3 (repeatable)")


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


def load_for_results(args: argparse.Namespace) -> Spec:
    """The spec without importing its objective: best/trials/report/dashboard only read the storage."""
    from hpsearch.spec.loader import load_spec

    return load_spec(args.spec, spec_overrides(args), check_objective=False)


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
    """promote and audit: fixed-config re-runs through the engine's slots (study/rerun_queue.py)."""
    add_scale_args(p)
    p.add_argument("--queue-only", action="store_true", help="queue the re-runs for `hpsearch worker` processes and exit")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")


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
