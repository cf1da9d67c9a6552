"""Command line: serve the reference app (or any ``module:attr`` ASGI app) with a production server.

    python -m aquilia_app --host 127.0.0.1 --port 8081 --workers 1 [--server granian|uvicorn] [--interface rsgi|asgi]

``--port 0`` binds an ephemeral port; the bound address is printed as
``aquilia_app listening on http://HOST:PORT`` once the socket is bound.  With ``--workers N > 1`` the
Prometheus client runs in multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, a fresh temp dir unless
set) so ``/metrics`` aggregates every worker, and all workers share one SQLite file.
"""
from __future__ import annotations

import argparse
import atexit
import glob
import math
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import sys
import tempfile

DEFAULT_PORT = 8081
DEFAULT_SERVER = "granian"  # through RSGI, its native interface (rsgi.py; figures in the README)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="aquilia_app", description="Serve the aquilia_app reference app.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 = ephemeral (the bound port is printed)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--server", choices=("uvicorn", "granian"), default=DEFAULT_SERVER)
    p.add_argument("--interface", choices=("rsgi", "asgi"), default=None,
                   help="granian: rsgi (default, granian's native interface) or asgi; uvicorn: asgi only")
    p.add_argument("--app", default=None,
                   help="app as module:attribute (default: the reference app, aquilia_app.app:app for RSGI, "
                        "aquilia_app.app:asgi for ASGI)")
    p.add_argument("--db", default=None, help="SQLite file (default: a fresh temp file)")
    p.add_argument("--no-metrics", action="store_true", help="turn instrumentation and /metrics off")
    p.add_argument("--max-body", type=int, default=None, help="request body limit in bytes (default 1 MiB)")
    p.add_argument("--body-timeout", type=float, default=None,
                   help="seconds to receive a whole request body, then 408 (default 30; 0 = no limit)")
    p.add_argument("--header-timeout", type=float, default=None,
                   help="granian only: seconds to receive the request headers (or to wait on a silent "
                        "connection), then the connection is closed (granian's header_read_timeout; default 30)")
    p.add_argument("--pool-timeout", type=float, default=None,
                   help="seconds a request waits for a free SQLite connection, then 503 (default 5)")
    p.add_argument("--root-path", default="",
                   help="the path prefix a reverse proxy serves the app under (e.g. /api): the app routes on what "
                        "follows it and builds its URLs with it; ASGI only (uvicorn, or granian --interface asgi)")
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"))
    a = p.parse_args(argv)
    if not 0 <= a.port <= 65535:
        p.error("--port must be between 0 and 65535")
    if a.workers < 1:
        p.error("--workers must be >= 1")
    if a.max_body is not None and a.max_body < 0:
        p.error("--max-body must be >= 0")
    _check_timeouts(p, a)
    if a.interface is None:
        a.interface = "rsgi" if a.server == "granian" else "asgi"
    elif a.interface == "rsgi" and a.server != "granian":
        p.error("--interface rsgi needs --server granian (uvicorn serves ASGI only)")
    _check_root_path(p, a)
    if a.app is None:
        a.app = "aquilia_app.app:app" if a.interface == "rsgi" else "aquilia_app.app:asgi"
    return a


def _check_root_path(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    if not a.root_path:
        return
    if not a.root_path.startswith("/") or any(c.isspace() or c in "?#" for c in a.root_path):
        p.error(f"--root-path is a path such as /api, not {a.root_path!r}")
    if a.interface == "rsgi":
        p.error("--root-path needs ASGI (--interface asgi, or --server uvicorn): an RSGI scope has no root path")
    a.root_path = a.root_path.rstrip("/")


MAX_TIMEOUT = 1e9  # seconds (about 31 years): granian takes milliseconds as a 64-bit integer


def _check_timeouts(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    for opt, value in (("--body-timeout", a.body_timeout), ("--pool-timeout", a.pool_timeout),
                       ("--header-timeout", a.header_timeout)):
        if value is not None and not (math.isfinite(value) and value <= MAX_TIMEOUT):  # nan, inf, 1e300
            p.error(f"{opt} must be a number of seconds up to {MAX_TIMEOUT:g}, not {value!r}")
    if a.body_timeout is not None and a.body_timeout < 0:
        p.error("--body-timeout must be >= 0")
    if a.pool_timeout is not None and not a.pool_timeout > 0:
        p.error("--pool-timeout must be > 0")
    if a.header_timeout is not None:
        if not a.header_timeout >= 0.001:
            p.error("--header-timeout must be at least 0.001 (one millisecond)")
        if a.server != "granian":
            p.error("--header-timeout needs --server granian (uvicorn has no header read timeout)")


def _prepare_env(a: argparse.Namespace) -> None:
    if not os.environ.get("AQUILIA_APP_SECRET_KEY"):  # one key for every worker, so any worker reads a session
        print("aquilia_app: AQUILIA_APP_SECRET_KEY is not set: sessions are signed with a random key "
              "that lasts until the server stops", file=sys.stderr)
        os.environ["AQUILIA_APP_SECRET_KEY"] = secrets.token_hex(32)
    if a.no_metrics:
        os.environ["AQUILIA_APP_METRICS"] = "0"
    if a.max_body is not None:
        os.environ["AQUILIA_APP_MAX_BODY"] = str(a.max_body)
    if a.body_timeout is not None:
        os.environ["AQUILIA_APP_BODY_TIMEOUT"] = str(a.body_timeout)
    if a.pool_timeout is not None:
        os.environ["AQUILIA_APP_POOL_TIMEOUT"] = str(a.pool_timeout)
    if a.db:
        os.environ["AQUILIA_APP_DB"] = os.path.abspath(a.db)
    elif not os.environ.get("AQUILIA_APP_DB"):
        d = tempfile.mkdtemp(prefix="aquilia_app_db_")
        atexit.register(shutil.rmtree, d, True)
        os.environ["AQUILIA_APP_DB"] = os.path.join(d, "items.sqlite3")
    if a.app.startswith("aquilia_app.app:"):
        # Schema and WAL set-up once, here in the parent, before the workers start: N workers doing it
        # at the same moment on a new file contend for SQLite's exclusive lock.
        from .app_schema import SCHEMA
        from .db import prepare_database
        prepare_database(os.environ["AQUILIA_APP_DB"], SCHEMA)
    if a.workers > 1 and not a.no_metrics:
        mdir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if mdir:
            os.makedirs(mdir, exist_ok=True)
            for f in glob.glob(os.path.join(mdir, "*.db")):
                os.unlink(f)
        else:
            mdir = tempfile.mkdtemp(prefix="aquilia_app_prom_")
            atexit.register(shutil.rmtree, mdir, True)
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = mdir


def _announce(host: str, port: int) -> None:
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address goes in brackets in a URL (RFC 3986)
    print(f"aquilia_app listening on http://{shown}:{port}", flush=True)


def serve_uvicorn(a: argparse.Namespace) -> None:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(a.app, host=a.host, port=a.port, workers=a.workers, loop="uvloop", http="httptools",
                            lifespan="on", log_level=a.log_level, access_log=False, server_header=False,
                            ws="websockets-sansio", backlog=2048, proxy_headers=False, interface="asgi3",
                            root_path=a.root_path)
    # Bound here rather than by config.bind_socket(), which logs the OSError and exits with uvicorn's own
    # status (3): an address that cannot be bound is main()'s clear message and status 2, as on granian.
    sock = socket.socket(socket.AF_INET6 if ":" in a.host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((a.host, a.port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)  # the workers of uvicorn's Multiprocess inherit it
    _announce(a.host, sock.getsockname()[1])
    server = uvicorn.Server(config)
    if a.workers == 1:
        server.run(sockets=[sock])
    else:
        Multiprocess(config, sockets=[sock]).run()


def serve_granian(a: argparse.Namespace) -> None:
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces, Loops
    from granian.http import HTTP1Settings
    from granian.log import LogLevels

    # granian binds the socket itself (and panics if it cannot): probe the address first, which also
    # picks the free port when --port 0.
    with socket.socket(socket.AF_INET6 if ":" in a.host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((a.host, a.port))
        port = s.getsockname()[1]
    _announce(a.host, port)
    # granian turns "module:attr" into a dotted name by walking up from the *current directory* while
    # the parent folders hold an __init__.py (Bazel runfiles have them everywhere) - run it from an
    # empty directory so the target is imported exactly as given, from sys.path.
    neutral = tempfile.mkdtemp(prefix="aquilia_app_run_")
    atexit.register(shutil.rmtree, neutral, True)
    os.chdir(neutral)
    interface = Interfaces.RSGI if a.interface == "rsgi" else Interfaces.ASGI
    http1 = None  # granian's defaults
    if a.header_timeout is not None:  # granian reads the headers: the app never sees a slow header block
        http1 = HTTP1Settings(header_read_timeout=round(a.header_timeout * 1000))
    Granian(a.app, address=a.host, port=port, interface=interface, workers=a.workers, loop=Loops.uvloop,
            http=HTTPModes.http1, http1_settings=http1, websockets=True, log_enabled=True,
            log_level=LogLevels(a.log_level), backlog=2048, url_path_prefix=a.root_path or None).serve()


def _exit_on_sigterm(signum, frame) -> None:
    # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default handler that kills
    # the process before atexit removes the temporary database folder.
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    a = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        _prepare_env(a)
    except (OSError, sqlite3.Error) as e:  # --db in a folder that does not exist, not writable, not SQLite...
        print(f"aquilia_app: cannot use the database {os.environ.get('AQUILIA_APP_DB')}: {e}", file=sys.stderr)
        return 2
    try:
        (serve_uvicorn if a.server == "uvicorn" else serve_granian)(a)
    except OSError as e:
        print(f"aquilia_app: cannot serve on {a.host}:{a.port}: {e}", file=sys.stderr)
        return 2
    return 0
