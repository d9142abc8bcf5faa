"""``python -m hpsearch.cli``: the same command as ``hpsearch``."""

from __future__ import annotations

import sys

from hpsearch.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
