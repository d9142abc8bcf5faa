"""Benchmarks and their committed results; each script runs from the checkout's root as
``python -m bench.<name>`` (BENCHMARKS.md shows the command beside every figure)."""
