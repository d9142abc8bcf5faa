"""Serve optuna-dashboard on a study's storage.

    python -m hpsearch.dashboard sqlite:///runs/quickstart.db [--host 127.0.0.1] [--port 8080]
"""

from __future__ import annotations

import argparse
import sys

from hpsearch.errors import UserError
from hpsearch.storage import (
    redact as redact_url,  # one redaction rule for every printed URL
)


def dashboard_url(host: str = "127.0.0.1", port: int = 8080) -> str:
    """Browser address of the dashboard served on host:port."""
    if ":" in host and not host.startswith("["):  # bare IPv6 address
        host = f"[{host}]"
    return f"http://{host}:{port}/dashboard/"


def start_dashboard(storage_url: str, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve optuna-dashboard for every study in `storage_url`; blocks until interrupted.

    Binds to 127.0.0.1 by default: the dashboard can edit studies and has no login, so expose
    it beyond this machine only on purpose (e.g. host="0.0.0.0" behind an SSH tunnel or VPN).
    Raises UserError when the storage cannot be opened (a missing SQLite file included).
    """
    import optuna_dashboard

    from hpsearch.storage import open_storage

    print(f"optuna-dashboard for {redact_url(storage_url)}", flush=True)
    # The storage the searches write: same driver choice, WAL and busy timeout for SQLite;
    # create=False so a mistyped path fails instead of becoming a new, empty database.
    storage = open_storage(storage_url, create=False)
    print(f"open {dashboard_url(host, port)}  (Ctrl-C to stop)", flush=True)
    try:
        optuna_dashboard.run_server(storage, host=host, port=port)
    except KeyboardInterrupt:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpsearch.dashboard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("storage_url", help="Optuna storage, e.g. sqlite:///runs/study.db")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind; 0.0.0.0 exposes it to the network "
                        "(default: %(default)s)")
    parser.add_argument("--port", type=int, default=8080, help="TCP port (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        start_dashboard(args.storage_url, host=args.host, port=args.port)
    except UserError as exc:
        print("\n".join(f"error: {line}" for line in exc.lines), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
