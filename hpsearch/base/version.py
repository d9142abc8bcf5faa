"""The installed package's version (``0+unknown`` in a checkout that was not installed)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hpsearch")
except PackageNotFoundError:
    __version__ = "0+unknown"
