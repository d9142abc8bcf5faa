"""Plots (HTML and PNG), parameter importances and an index page for one study: `write_report`."""

from hpsearch.report.page import write_report

__all__ = ["write_report"]
