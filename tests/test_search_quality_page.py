"""docs/benchmarks/search-quality.md is bench/quality/page.md filled from the committed results."""

from __future__ import annotations

from bench.quality import page


def test_committed_page_is_the_rendered_one():
    assert page.PAGE.read_text() == page.render(), "stale: run .venv/bin/python -m bench.quality.page"
