"""MkDocs hook: the parts of the docs site that come from the code, rendered at build time.

A page marks a generated part with an HTML comment on a line of its own; the hook replaces it:

    <!-- generated: cli -->              `hpsearch <cmd> --help` for every command (hpsearch/cli/'s parser)
    <!-- generated: spec-keys -->        every spec key: type, default, what it is (spec/loader.py's models)
    <!-- generated: registries -->       samplers, pruners, backends, Ray schedulers (spec/registry.py)
    <!-- generated: defaults -->         what a spec leaves unset resolves to (spec/defaults.py)
    <!-- generated: ray-schedulers -->   Ray schedulers alone
    <!-- generated: objective-keys -->   the built-in objective's keys (objectives/image_classification.py)

RELIABILITY.md, ARCHITECTURE.md and BENCHMARKS.md stay at the repository root, where a reader
of the repository looks; the site gets them as pages, their links rewritten to the site's.
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)
ROOT_PAGES = {"RELIABILITY.md": "reliability.md", "ARCHITECTURE.md": "architecture.md", "BENCHMARKS.md": "benchmarks.md"}
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)#\s]*)(#[^)\s]*)?\)")
# Spec keys whose model field carries no comment of its own
NOTES = {
    "study": "the study's name: letters, digits, '.', '_' or '-'; names its folder under output",
    "objective": "`module:function` or `path/to/file.py:function`; default the built-in image classifier",
    "metric": "the metric the search optimizes (a key of the objective's returned dict), or a list of them",
    "direction": "maximize or minimize, one per metric",
    "storage": "an Optuna storage URL (postgresql://... for several machines); default sqlite in output/study/",
    "output": "folder for studies, relative to the spec file",
    "backend": "optuna (embedded) or ray (Ray Tune)",
    "fixed": "config keys every trial gets as they are",
    "space": "the searched parameters: ranges, choices and conditional options",
    "description": "free text, shown by validate and the report",
    "warm_start": "learn from an earlier study; a list is read as `{configs: LIST}`",
    "budget": "when the study stops",
    "sampler": "how configs are proposed; a name alone is `{name: NAME}`",
    "pruner": "how trials are stopped early; a name alone is `{name: NAME}`",
    "resources": "trial slots, GPUs and threads on this machine",
    "ray": "the Ray Tune backend (`backend: ray`)",
    "pruner.interval_epochs": "judge a trial every this many epochs (Optuna's interval_steps)",
}


# ---------------------------------------------------------------------------- MkDocs events


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for src, dest in ROOT_PAGES.items():
        files.append(File.generated(config, dest, content=root_page((ROOT / src).read_text())))
    for png in sorted((ROOT / "bench" / "results").glob("*.png")):
        files.append(File.generated(config, f"assets/bench/{png.name}", abs_src_path=str(png)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARK.sub(lambda m: GENERATORS[m.group(1)]().strip(), markdown)


# ---------------------------------------------------------------------------- root files as pages


def root_page(text: str) -> str:
    """Links of a root file, made right for a page at the top of the site."""

    def fix(m: re.Match[str]) -> str:
        bang, label, target, anchor = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        if not target or "://" in target:
            return m.group(0)
        if target in ROOT_PAGES:
            return f"{bang}[{label}]({ROOT_PAGES[target]}{anchor})"
        if target == "README.md":
            return f"[{label}](index.md{anchor})"
        if target.startswith("docs/"):
            return f"{bang}[{label}]({target.removeprefix('docs/')}{anchor})"
        if target.startswith("bench/results/") and target.endswith(".png"):
            return f"{bang}[{label}](assets/bench/{Path(target).name})"
        return f"{label} (`{target}`)"  # a file of the repository, not of the site

    return LINK.sub(fix, text)


# ---------------------------------------------------------------------------- generators


def cli() -> str:
    import argparse

    from hpsearch.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal's width: the same text on every machine
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = ["## hpsearch", "", "```text", parser.format_help().rstrip(), "```"]
    for name, p in sub.choices.items():
        out += ["", f"## hpsearch {name}", "", "```text", p.format_help().rstrip(), "```"]
    return "\n".join(out)


def spec_keys() -> str:
    from hpsearch.spec.loader import Spec

    rows = ["| key | type | default | what it is |", "|---|---|---|---|", *_model_rows(Spec, "")]
    return "\n".join(rows)


def _model_rows(model: Any, prefix: str) -> list[str]:
    from pydantic import BaseModel

    notes, types = _field_notes(model)
    rows = []
    for name, field in model.model_fields.items():
        key = prefix + name
        sub = field.annotation if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel) else None
        note = notes.get(name) or NOTES.get(key, "")
        if sub is not None:
            rows.append(f"| `{key}` | section | | {_cell(note)} |")
            rows += _model_rows(sub, key + ".")
            continue
        default = "required" if field.is_required() else f"`{_yaml(field.default)}`"
        rows.append(f"| `{key}` | `{types.get(name, '')}` | {default} | {_cell(note)} |")  # a code span may hold a pipe
    return rows


def _field_notes(model: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Per field of ``model``: the comment beside it (or on the line above it) and its annotation, as written."""
    notes, types, above = {}, {}, ""
    for line in inspect.getsource(model).splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above = (above + " " + stripped.lstrip("# ")).strip()
            continue
        m = re.match(r"\s+(\w+): ([^=#]+?)\s*(?:=[^#]*)?(?:#\s*(.*))?$", line)
        if m and not stripped.startswith(("def ", "@", "_")):
            types[m.group(1)] = m.group(2).strip()
            notes[m.group(1)] = (m.group(3) or above).strip()
        above = ""
    return notes, types


def _yaml(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def registries() -> str:
    from hpsearch.spec.registry import TABLES, table

    return "\n\n".join(table(kind, key) for key, kind in TABLES.items())


def defaults() -> str:
    from hpsearch.spec.defaults import table

    return table()


def ray_schedulers() -> str:
    from hpsearch.spec.registry import RAY_SCHEDULERS, table

    return table(RAY_SCHEDULERS, "ray.scheduler")


def objective_keys() -> str:
    """The key table of the objective's docstring: rows with an empty key cell continue the row above."""
    from hpsearch.objectives import image_classification as ic

    rows: list[list[str]] = []
    for line in (ic.__doc__ or "").splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "key":
            continue
        if not cells[0] and rows:
            rows[-1] = [a + (" " + b if b else "") for a, b in zip(rows[-1], cells, strict=False)]
        else:
            rows.append(cells)
    lines = ["| key | default | meaning (unit) |", "|---|---|---|"]
    return "\n".join(lines + [f"| `{k}` | {d} | {_cell(m)} |" for k, d, m in rows])


GENERATORS = {
    "cli": cli,
    "spec-keys": spec_keys,
    "registries": registries,
    "defaults": defaults,
    "ray-schedulers": ray_schedulers,
    "objective-keys": objective_keys,
}
