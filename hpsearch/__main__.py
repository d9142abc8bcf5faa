"""``python -m hpsearch``: the same as the ``hpsearch`` command."""

import sys

from hpsearch.cli import main

sys.exit(main())
