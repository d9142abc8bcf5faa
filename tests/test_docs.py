"""The docs site's generated parts (docs/hooks.py): what a reader finds on the CLI, spec and
objective pages comes from the code, and root files' links point into the site. The strict build
itself (broken links, pages missing from nav) is `make docs`, which `make test` runs."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from hpsearch.cli import build_parser
from hpsearch.spec.loader import Spec

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_page_has_the_help_of_every_command(hooks):
    page = hooks.cli()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        assert f"## hpsearch {name}\n" in page, name
    assert "--resume-anyway" in page and "usage: hpsearch run" in page


def test_the_spec_page_lists_every_key_with_a_note(hooks):
    page = hooks.spec_keys()
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines()[2:]}
    for section in ("budget", "sampler", "pruner", "resources", "warm_start", "ray"):
        fields = type(getattr(Spec.model_construct(), section)).model_fields
        assert {f"{section}.{f}" for f in fields} <= set(rows), section
    assert "| `20` |" in rows["budget.trials"] and "across resumes" in rows["budget.trials"]
    assert "one per GPU share" in rows["resources.workers"]  # a comment on the line above its field
    assert "| required |" in rows["study"]
    assert [k for k, line in rows.items() if line.rstrip().endswith("|  |")] == []  # every key says what it is


def test_the_objective_page_merges_wrapped_rows(hooks):
    rows = hooks.objective_keys().splitlines()[2:]
    keys = [r.split("|")[1].strip(" `") for r in rows]
    assert keys[0] == "dataset" and "" not in keys and "flush_denormal" in keys
    fused = rows[keys.index("fused_optimizer")]
    assert "loop of small ops per parameter" in fused and "false = PyTorch's default" in fused


def test_root_files_link_into_the_site(hooks):
    text = "[R](RELIABILITY.md#x) [Q](docs/benchmarks/search-quality.md) ![p](bench/results/a.png) [s](bench/x.py) [w](https://e.org)"
    assert hooks.root_page(text) == (
        "[R](reliability.md#x) [Q](benchmarks/search-quality.md) ![p](assets/bench/a.png) s (`bench/x.py`) [w](https://e.org)"
    )
