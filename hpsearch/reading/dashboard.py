"""Serve optuna-dashboard on a study's storage.

python -m hpsearch.reading.dashboard sqlite:///runs/quickstart.db [--host 127.0.0.1] [--port 8080]
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys

from hpsearch.base.errors import UserError
from hpsearch.study.storage import (
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
    Raises UserError when host:port cannot be listened on, or the storage cannot be opened (a
    missing SQLite file included).
    """
    check_address(host, port)
    import optuna_dashboard

    from hpsearch.study.storage import open_storage

    print(f"optuna-dashboard for {redact_url(storage_url)}", flush=True)
    # The storage the searches write: same driver choice, WAL and busy timeout for SQLite;
    # create=False so a mistyped path fails instead of becoming a new, empty database.
    storage = open_storage(storage_url, create=False)
    print(f"open {dashboard_url(host, port)}  (Ctrl-C to stop)", flush=True)
    try:
        optuna_dashboard.run_server(storage, host=host, port=port)
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # taken between the check and the server's own bind
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def check_address(host: str, port: int) -> None:
    """Bind host:port once, as the server will, so a bad address is one line instead of a traceback."""
    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: a TCP port is 1-65535; the default is 8080")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise UserError(
            f"--host {host}: not an address or a name of this machine ({exc.strerror}); "
            "use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
        ) from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as wsgiref's server does
        try:
            sock.bind(address)
        except OSError as exc:
            raise UserError(_bind_problem(exc, host, port, family)) from None


def _bind_problem(exc: OSError, host: str, port: int, family: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        free = free_port(host, family, near=port)
        return f"--port {port}: {host}:{port} is already in use (another dashboard?); port {free} is free: --port {free}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"--host {host}: not an address of this machine; use 127.0.0.1 (this machine only), "
            "0.0.0.0 (every interface) or one of this machine's addresses"
        )
    if exc.errno == errno.EACCES:
        return f"--port {port}: ports below 1024 need root; use one above, e.g. --port 8080"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


def free_port(host: str, family: int, near: int) -> int:
    """The first port after ``near`` that host can listen on (any free one if the next 20 are taken)."""
    for port in [*range(near + 1, min(near + 21, 65536)), 0]:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return int(sock.getsockname()[1])  # (host, port[, flow, scope]): its type depends on the family
    raise UserError(f"--port {near}: in use, and no free port found on {host}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hpsearch.reading.dashboard", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("storage_url", help="Optuna storage, e.g. sqlite:///runs/study.db")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind; 0.0.0.0 exposes it to the network (default: %(default)s)")
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
