"""The text of the starter spec ``hpsearch init`` writes: YAML with a comment on every choice it made."""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from hpsearch.tools.helptext import Help, Option
from hpsearch.tools.init_probe import HELD_OUT, Probe, direction, pick_metric

TRIALS = 20  # the starter budget
FIXED_NOTE = {
    False: "the script's other flags at the defaults its --help shows",
    True: "the app's own config (its --help): uncomment to pin a value",
}
Row = tuple[str, str]  # (YAML, its comment)
BOOLEAN_NOTES = {
    "store_true": "--tied or nothing; negatable: --x / --no-x; json: --x=true",
    "negatable": "--amp or --no-amp; store_true: --x or nothing; json: --x=true",
    "json": "--x=true/false; python: True/False; int: 1/0; store_true: --x or nothing",
}


def yaml_value(value: Any) -> str:
    return str(yaml.safe_dump([value], default_flow_style=True, width=10**6).strip()[1:-1])


def render(rows: list[Row]) -> str:
    """Rows with their comments aligned in one column."""
    column = min(max((len(code) for code, note in rows if note), default=0) + 2, 46)
    return "\n".join(f"{code:<{column - 2}}  # {note}".rstrip() if note else code for code, note in rows) + "\n"


def option_note(option: Option) -> str:
    """The flag and its help, one short comment."""
    words = re.sub(r"\s*[(\[]default:[^)\]]*[)\]]", "", " ".join(option.help.split()))
    return f"{option.flag}: {words}"[:90] if words else option.flag


def propose(key: str, default: Any) -> tuple[dict[str, Any], str] | None:
    """A search range for a name hpsearch recognises, around the default when there is one."""
    leaf = key.rsplit(".", 1)[-1].lower()
    number = float(default) if isinstance(default, int | float) and not isinstance(default, bool) else None
    if re.fullmatch(r"(base_|max_|peak_)?(lr|learning_rate)", leaf):
        if number and number > 0:
            return {"float": [_round(number / 10), _round(number * 10)], "log": True}, f"10x either side of the default {number:g}"
        return {"float": [1.0e-5, 1.0e-1], "log": True}, "a common range (no default shown)"
    if leaf in ("weight_decay", "wd"):
        low, high = (number / 10, number * 10) if number and number > 0 else (1.0e-6, 1.0e-1)
        return {"float": [_round(low), _round(high)], "log": True}, "log scale"
    if ("batch_size" in leaf or leaf == "bs") and not re.search(r"test|eval|val", leaf):  # the training batch only
        size = int(number) if number and number >= 2 else None
        return (
            ({"choice": [size // 2, size, size * 2]}, f"half and twice the default {size}") if size else ({"choice": [16, 32, 64, 128]}, "")
        )
    if "dropout" in leaf or leaf == "drop_rate":
        return {"float": [0.0, 0.5 if (number or 0.0) <= 0.5 else round(min(0.9, 2 * (number or 0.0)), 2)]}, ""
    if leaf == "momentum":
        return {"float": [0.8, 0.99]}, ""
    if leaf.startswith("warmup"):
        if (isinstance(default, float) and 0 <= default <= 1) or (default is None and re.search(r"ratio|frac|pct|proportion", leaf)):
            return {"float": [0.0, max(0.2, round(2 * (default or 0.0), 3))]}, "a fraction of training"
        if default is None and "epoch" in leaf:
            return {"int": [0, 3]}, "epochs (whole: the script's type is not shown)"
        top = int(2 * number) if number and number >= 1 else 1000
        return {"int": [0, top]}, f"up to twice the default {number:g}" if number else "steps"
    return None


def _round(x: float) -> float:
    return round(x, -int(math.floor(math.log10(abs(x)))) + 1) if x else 0.0


def flag_rows(options: list[Option]) -> tuple[list[Row], str]:
    """The ``flags:`` block for what the help shows, per-key exceptions, and a summary."""
    dashed = [o for o in options if "-" in o.flag[2:]]
    underscored = [o for o in options if "_" in o.flag[2:]]
    names = "dashes" if len(dashed) > len(underscored) else "keep"
    stores = [o for o in options if not o.takes_value and not o.negatable]
    pairs = [o for o in options if o.negatable]
    booleans = "negatable" if len(pairs) > len(stores) else ("store_true" if stores else "json")
    keys: dict[str, dict[str, str]] = {o.key: {"name": o.flag[2:]} for o in (underscored if names == "dashes" else dashed)}
    for o in stores if booleans == "negatable" else pairs:
        keys.setdefault(o.key, {})["booleans"] = "negatable" if o.negatable else "store_true"
    for o in options:
        if o.takes_value and o.type == "bool":  # --fp16 True: the help prints its default as Python does
            keys.setdefault(o.key, {})["booleans"] = "python"
    spelled = "--batch-size for the key batch_size" if names == "dashes" else "the key as written: --batch_size"
    rows: list[Row] = [
        ("  flags:", "how a trial's config becomes arguments (docs/your-code.md, Flags)"),
        ("    form: equals", "--name=value; space: --name value; hydra: name=value overrides"),
        (f"    names: {names}", f"{spelled}, as --help spells them"),
        (f"    booleans: {booleans}", BOOLEAN_NOTES[booleans]),
    ]
    if keys:
        rows.append(("    keys:", "flags spelled or taken differently from the rest"))
        rows += [(f"      {k}: {yaml_value(v)}", "") for k, v in keys.items()]
    return rows, f"flags names: {names}, booleans: {booleans}" + (f", {len(keys)} per-key" if keys else "")


def argparse_rows(options: list[Option]) -> tuple[list[Row], list[Row]]:
    """(fixed, space) for a script with flags."""
    fixed: list[Row] = []
    space: list[Row] = []
    for o in options:
        made = propose(o.key, o.default if o.has_default else None) if o.takes_value and o.type != "bool" else None
        if made is not None:
            space.append((f"  {o.key}: {yaml_value(made[0])}", "; ".join(x for x in (o.flag, made[1]) if x)))
        elif o.has_default:
            fixed.append((f"  {o.key}: {yaml_value(o.default)}", option_note(o)))
        else:
            fixed.append((f"  # {o.key}:", f"{option_note(o)} (no default in --help)"))
    return fixed, space


def hydra_rows(config: dict[str, Any]) -> tuple[list[Row], list[Row], list[Row]]:
    """(flags, fixed, space) for a Hydra app: overrides with dotted keys; a searched leaf is renamed (lr -> optimizer.lr)."""
    leaves = _leaves(config)
    short = {path: path.rsplit(".", 1)[-1] for path in leaves}
    counts = {name: list(short.values()).count(name) for name in short.values()}
    space: list[Row] = []
    keys: list[Row] = []
    fixed: list[Row] = []
    for path, value in leaves.items():
        key = short[path] if counts[short[path]] == 1 else path.replace(".", "_")
        made = propose(path, value)
        if made is not None:
            space.append((f"  {key}: {yaml_value(made[0])}", "; ".join(x for x in (path, made[1]) if x)))
            keys.append((f"      {key}: {{name: {path}}}", ""))
        else:
            fixed.append((f"  # {path}: {yaml_value(value)}", ""))
    flags: list[Row] = [
        ("  flags:", "how a trial's config becomes arguments (docs/your-code.md, Flags)"),
        ("    form: hydra", "name=value overrides; nested fixed: keys become dotted (trainer.max_epochs=10)"),
    ]
    if keys:
        flags += [("    keys:", "a searched key's place in the app's config"), *keys]
    return flags, fixed, space


def _header(key: str, rows: list[Row]) -> str:
    """``fixed:`` over its rows, or ``# fixed:`` when every row is commented out (an empty mapping is null)."""
    return key if any(not code.lstrip().startswith("#") for code, _ in rows) else f"# {key}"


def _leaves(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        elif isinstance(value, bool | int | float) or (isinstance(value, str) and "${" not in value):
            out[prefix + str(key)] = value
    return out


def metric_rows(probed: Probe | None) -> tuple[str, list[Row]]:
    """The metric, its rows (metric, direction), and a pruner row when the steps are not epochs."""
    names = probed.names() if probed else []
    metric = pick_metric(names) or "val_loss"
    if probed is None:
        note = "a guess: `hpsearch init --probe 30 ...` runs the script to see what it prints"
    elif not names:
        note = f"a guess: the {probed.seconds:g} s probe read no metric" + (f"; the script {probed.exit}" if probed.exit else "")
    else:
        where = f"seen in {probed.log.path}" if probed.log is not None and probed.reports is probed.log.rows else "seen in the probe"
        note = f"{where}: {', '.join(names)} (steps from {probed.unit or 'a step key'})"
    rows: list[Row] = [
        (f"metric: {yaml_value(metric)}", note),
        (f"direction: {direction(metric)}", "guessed from the name (loss, error, ppl: minimize; acc, f1, auc: maximize)"),
        (f"budget: {{trials: {TRIALS}}}", ""),
    ]
    steps = sorted({step for step, values in probed.reports if metric in values}) if probed else []  # the metric's own steps
    if probed and probed.unit and "epoch" not in probed.unit and len(steps) >= 2:
        warm = steps[min(2, len(steps) - 1)]
        seen = ", ".join(map(str, steps[:4]))
        rows.append((f"pruner: {{warmup_epochs: {warm}}}", f"steps are {probed.unit} here ({seen}...): none pruned up to step {warm}"))
    return metric, rows


def spec_text(argv: list[str], found: Help, probed: Probe | None, out: Path) -> tuple[str, str]:
    """(the spec's text, a one-line summary)."""
    command = shlex.join(argv)
    given = {a.split("=", 1)[0] for a in argv[1:] if a.startswith("--")}  # set in the command already
    options = [o for o in found.options if o.flag not in given]
    if found.hydra is not None:
        flags, fixed, space = hydra_rows(found.hydra)
        style = "flags form: hydra"
    else:
        flags, style = flag_rows(options)
        fixed, space = argparse_rows(options)
    printed = pick_metric(probed.names()) if probed else None
    log = probed.log if probed and probed.log and not (printed and HELD_OUT.search(printed.lower())) else None
    if log is not None and probed is not None:  # read from the log the script wrote, not from what it printed
        probed = Probe(probed.seconds, reports=log.rows, unit=log.unit, log=log)
        reading: list[Row] = [
            (f"  metrics: {log.kind}", f"the probe saw it write {log.path}"),
            (f"  logs: {yaml_value(log.glob)}", "relative to the trial's folder"),
            (
                "  workdir: trial",
                "a folder per trial: parallel trials never share a log (files the script opens by default: pass them in the command)",
            ),
        ]
    else:
        reading = [
            ("  metrics: auto", "JSON, dicts, name=value, 'valid loss 6.12'... each with its step (epoch N, step N)"),
            ("  # workdir: trial", "a folder per trial: for a script that writes logs or checkpoints to fixed paths"),
        ]
    metric, metric_part = metric_rows(probed)
    source = "its --help" + (f" and a {probed.seconds:g} s probe run" if probed else "")
    head = [
        f"# {out.name}: a starter spec for `{command}`, written by `hpsearch init` from {source}.",
        "# Check the ranges and the fixed values, then:",
        f"#   hpsearch validate {out.name}    # a sample trial's exact command line, the space",
        f"#   hpsearch run {out.name}",
    ]
    rows: list[Row] = [
        (f"study: {yaml_value(out.stem)}", ""),
        ("objective:", ""),
        (f"  command: {yaml_value(command)}", ""),
        *flags,
        *reading,
        *metric_part,
        *([(_header("fixed:", fixed), FIXED_NOTE[found.hydra is not None])] + fixed if fixed else []),
        *([("space:", "proposed for names hpsearch recognises; widen or narrow them")] + space if space else []),
    ]
    searched = [code.split(":")[0].strip() for code, _ in space]
    how = "seen in the probe" if rows and metric_part[0][1].startswith("seen in") else "a guess"
    summary = (
        f"`{command}`: {len(fixed) + len(space)} options, {len(searched)} searched ({', '.join(searched) or 'none'}); "
        f"{style}; metric {metric}, {direction(metric)} ({how})"
    )
    return "\n".join(head) + "\n" + render(rows), summary
