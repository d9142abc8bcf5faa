"""The docs site's generated parts (docs/hooks.py): what a reader finds on the CLI, spec and
objective pages comes from the code, and root files' links point into the site. The strict build
itself (broken links, pages missing from nav) is `make docs`, which `make test` runs."""

from __future__ import annotations

import argparse
import importlib.util
import re
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


# ---------------------------------------------------------------------------- defaults the docs state

HAND_WRITTEN = [
    *(p for p in (ROOT / "docs").glob("*.md")),  # dated pages under benchmarks/ and experiments/ record what ran then
    ROOT / "README.md",
    *(ROOT / "spaces").glob("*.yaml"),
]


def plugin_names() -> set[str]:
    from hpsearch.spec.registry import BACKENDS, PRUNERS, RAY_SCHEDULERS, SAMPLERS

    return {*SAMPLERS, *PRUNERS, *RAY_SCHEDULERS, *BACKENDS, "TPE", "Hyperband", "auto"}


def default_claims() -> list[tuple[str, str]]:
    """(file, line) of hand-written lines that name a plug-in (as the code spells it) within 40 characters of "default"."""
    names = "|".join(sorted(plugin_names(), key=len, reverse=True))
    near = re.compile(rf"\b[Dd]efaults?\b.{{0,40}}\b({names})\b|\b({names})\b.{{0,40}}\b[Dd]efaults?\b")
    return [
        (str(path.relative_to(ROOT)), line.strip())
        for path in HAND_WRITTEN
        for line in path.read_text().splitlines()
        if near.search(line) and "<!-- generated" not in line
    ]


def fashion_defaults() -> dict[str, object]:
    from hpsearch.spec.defaults import resolve
    from hpsearch.spec.loader import load_spec

    return {r.key: r.value for r in resolve(load_spec(ROOT / "spaces" / "fashion.yaml", check_objective=False))}


def six_ranges_text() -> str:
    """What validate prints for a space of six ranges and a 12-trial budget (docs/search.md's example)."""
    from hpsearch.search.space import parse_space
    from hpsearch.spec.defaults import sampler_choice

    raw = {"study": "s", "budget": {"trials": 12}, "space": {f"x{i}": {"float": [0.0, 1.0]} for i in range(6)}}
    spec = Spec.model_validate(raw)
    spec._tree = parse_space(raw["space"], "space", [])
    r = sampler_choice(spec)
    return f"default {r.key}: {r.value} ({r.why})"


def metrics_default() -> str:
    from hpsearch.trial.command.options import Command

    return Command([], "").metrics


# Each hand-written statement of a default, with the check that the code has it. A new one fails
# test_every_default_the_docs_state_is_checked until it is added here (or generated instead).
CLAIMS = {
    ("spaces/fashion.yaml", "Sampler and pruner are left to hpsearch's defaults"): lambda: (
        fashion_defaults() == {"sampler.name": "bo", "sampler.startup_trials": 6, "pruner.name": "model"}
    ),
    ("docs/your-code.md", "`metrics: auto` (the default)"): lambda: metrics_default() == "auto",
    ("docs/search.md", "`default sampler.name: bo (12 trials"): lambda: (
        f"`{six_ranges_text()}`" in (ROOT / "docs" / "search.md").read_text()
    ),
    ("README.md", "default; `trials_per_gpu: auto` packs"): lambda: Spec.model_fields["resources"].default.workers is None,
}


def test_every_default_the_docs_state_is_checked():
    unchecked = [f"{f}: {line}" for f, line in default_claims() if not any(f == cf and frag in line for cf, frag in CLAIMS)]
    assert unchecked == [], "state these through <!-- generated: defaults --> or add a check to CLAIMS"


@pytest.mark.parametrize("claim", list(CLAIMS), ids=[f"{f}:{frag[:30]}" for f, frag in CLAIMS])
def test_each_checked_default_is_the_code_s(claim):
    file, fragment = claim
    assert any(f == file and fragment in line for f, line in default_claims()), f"{file} no longer says {fragment!r}: drop the claim"
    assert CLAIMS[claim]()


def test_the_defaults_table_is_generated_from_the_code(hooks):
    from hpsearch.spec.defaults import BO_INPUT_TRIALS, BO_STARTUP, MIN_STARTUP, TPE_STARTUP

    page = hooks.defaults()
    row = next(line for line in page.splitlines() if line.startswith("| `sampler.startup_trials`"))
    assert f"bo: {BO_STARTUP}" in row and f"at least {MIN_STARTUP}" in row and f"cmaes: {TPE_STARTUP}" in row
    assert f"at least {BO_INPUT_TRIALS} per model input" in page
    assert "<!-- generated: defaults -->" in (ROOT / "docs" / "spec.md").read_text()
