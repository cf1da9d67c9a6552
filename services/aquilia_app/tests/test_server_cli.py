"""Several workers (multiprocess metrics, shared SQLite), instrumentation off, and CLI errors."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx

from server_util import ROOT, child_env, running_server


def _count(text, route):
    m = re.search(r'http_server_request_duration_seconds_count\{method="GET",route="%s",service="aquilia_app",'
                  r'status_class="2xx"\} ([0-9.]+)' % re.escape(route), text)
    return float(m.group(1)) if m else 0.0


def test_two_workers_metrics_aggregate_every_worker():
    with running_server("--workers", "2") as (port, _):
        n = 60
        for _ in range(n):  # new connection per request: spreads over both workers
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
                assert c.get("/ping").status_code == 200
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
            r = c.post("/items", json={"name": "shared", "price": 1})
            assert r.status_code == 201
            for _ in range(10):  # every worker sees the same database
                assert c.get(r.headers["location"]).status_code == 200
        time.sleep(1.5)  # workers flush their local counts once a second
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
            scrapes = [c.get("/metrics").text for _ in range(4)]
        counts = {_count(t, "/ping") for t in scrapes}
        assert counts == {float(n)}, counts  # every scrape, whichever worker answers, sees all requests


def test_metrics_off():
    with running_server("--no-metrics") as (port, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
            assert c.get("/json").status_code == 200
            assert c.get("/metrics").status_code == 404


def _run_cli(*args):
    return subprocess.run([sys.executable, "-m", "aquilia_app", *args], capture_output=True, env=child_env(),
                          cwd=ROOT, timeout=30)


def test_cli_rejects_bad_arguments():
    p = _run_cli("--port", "70000")
    assert p.returncode == 2 and b"--port" in p.stderr
    p = _run_cli("--workers", "0")
    assert p.returncode == 2 and b"--workers" in p.stderr
    p = _run_cli("--server", "uvicorn", "--interface", "rsgi")
    assert p.returncode == 2 and b"--interface rsgi needs --server granian" in p.stderr
    for args, named in [(("--body-timeout", "-1"), b"--body-timeout"), (("--pool-timeout", "0"), b"--pool-timeout"),
                        (("--header-timeout", "0"), b"--header-timeout"),
                        (("--server", "uvicorn", "--header-timeout", "5"), b"--header-timeout needs --server granian"),
                        (("--root-path", "/api"), b"--root-path needs ASGI"),
                        (("--header-timeout", "inf"), b"--header-timeout"), (("--header-timeout", "1e20"), b"--header-timeout"),
                        (("--body-timeout", "nan"), b"--body-timeout"), (("--pool-timeout", "inf"), b"--pool-timeout"),
                        (("--server", "uvicorn", "--root-path", "api"), b"--root-path is a path")]:
        p = _run_cli(*args)
        assert p.returncode == 2 and named in p.stderr and b"Traceback" not in p.stderr, (args, p.stderr[-300:])


def test_cli_database_that_cannot_be_opened_is_a_clear_error(tmp_path):
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_bytes(b"not a database" * 100)
    for db in (tmp_path / "missing" / "items.sqlite3", not_sqlite):
        p = _run_cli("--port", "0", "--db", str(db))
        assert p.returncode == 2, (db, p.returncode, p.stderr[-300:])
        assert b"Traceback" not in p.stderr and b"cannot use the database" in p.stderr, db


def test_root_path_behind_a_proxy():
    """uvicorn puts --root-path in front of the path (the proxy strips it); granian's ASGI leaves the path
    as the proxy forwarded it.  Either way the app routes on what follows the root and its URLs hold it."""
    for server, sent in ((("--server", "uvicorn"), "/whoami"), (("--interface", "asgi"), "/api/whoami")):
        with running_server("--app", "edge_app:app", *server, "--root-path", "/api/") as (port, _):
            got = httpx.get(f"http://127.0.0.1:{port}{sent}", headers={"host": "shop.example"}, timeout=10).json()
            assert got["url"] == "http://shop.example/api/whoami", server
            assert got["base_url"] == "http://shop.example/api/", server
            assert got["header_x"] == "http://shop.example/api/header/x%20y", server


def test_cli_port_in_use_is_a_clear_error():
    # The README: an address that cannot be bound exits with status 2, as a bad argument does - on both servers.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        for server in ("granian", "uvicorn"):
            p = _run_cli("--port", str(port), "--server", server)
            assert p.returncode == 2, (server, p.returncode, p.stderr)
            assert b"Traceback" not in p.stderr and b"cannot serve on 127.0.0.1:%d" % port in p.stderr, server
    for server in ("granian", "uvicorn"):  # a host name that does not resolve
        p = _run_cli("--host", "no-such-host.invalid", "--port", "0", "--server", server)
        assert p.returncode == 2 and b"cannot serve on no-such-host.invalid" in p.stderr, (server, p.stderr)


def test_stopping_the_server_removes_its_temporary_folders(tmp_path):
    # Without --db the server keeps SQLite in a temporary folder; a SIGTERM (what process managers and the
    # bench send) must leave none behind, on either server.
    for server in ("granian", "uvicorn"):
        tmp = tmp_path / server
        tmp.mkdir()
        with running_server("--server", server, env={"TMPDIR": str(tmp)}) as (port, _):
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
                assert c.post("/items", json={"name": "x", "price": 1}).status_code == 201
            assert any(tmp.iterdir())  # the database folder exists while it serves
        assert list(tmp.iterdir()) == [], server


def test_the_printed_address_is_a_usable_url(capsys):
    from aquilia_app.server import _announce
    _announce("::1", 8081)
    _announce("127.0.0.1", 8081)
    out = capsys.readouterr().out.splitlines()
    assert out == ["aquilia_app listening on http://[::1]:8081", "aquilia_app listening on http://127.0.0.1:8081"]
    assert httpx.URL(out[0].split()[-1]).port == 8081


def test_sigterm_lets_the_requests_in_flight_finish():
    """README: SIGTERM (sent to the server's own process, as a process manager does) stops accepting,
    lets the requests in flight finish, then the server exits."""
    for args in (("--server", "granian"), ("--server", "uvicorn"), ("--workers", "2")):
        with running_server(*args) as (port, proc):
            got = {}

            def fetch():  # 10 chunks 200 ms apart: still running when the signal comes
                with httpx.stream("GET", f"http://127.0.0.1:{port}/stream?delay=200", timeout=15) as r:
                    got["body"] = b"".join(r.iter_bytes())

            t = threading.Thread(target=fetch)
            t.start()
            time.sleep(0.6)
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(15)
            t.join(15)
            assert len(got.get("body", b"")) == 10 * 1024, args
