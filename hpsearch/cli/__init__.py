"""Command line: parse, load the spec, call one library function. Bad input exits 2 in one line.

One module per command group (``search``, ``results``, ``training``), each holding its
commands' argparse definitions beside their thin handlers; ``main`` assembles the parser and
turns errors into exit codes; ``args`` is what the groups share.
"""

from __future__ import annotations

from hpsearch.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
