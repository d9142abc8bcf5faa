"""``python -m hpsearch``: the same as the ``hpsearch`` command."""

import sys

from hpsearch.cli import main

if __name__ == "__main__":  # not again in a child process that multiprocessing's spawn starts from this module
    sys.exit(main())
