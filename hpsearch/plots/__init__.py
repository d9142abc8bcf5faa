"""Plots (HTML and PNG), parameter importances and an index page for one study: `write_report`."""

from hpsearch.plots.page import write_report

__all__ = ["write_report"]
