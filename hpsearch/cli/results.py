"""Reading a study: best, trials, export, report, dashboard, status."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hpsearch.base.text import fmt
from hpsearch.cli.args import add_spec_args, load, load_for_results, positive_float


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


def add_parsers(sub: Any) -> None:
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
