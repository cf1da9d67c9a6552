from __future__ import annotations

import os
import socket
import sys

import pytest
import trustme

sys.path.insert(0, os.path.dirname(__file__))

from servers import Server  # noqa: E402


@pytest.fixture(scope="session")
def server():
    with Server() as s:
        yield s


@pytest.fixture(scope="session")
def ca():
    return trustme.CA()


@pytest.fixture(scope="session")
def ca_file(ca, tmp_path_factory):
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def _tls_server(ca, *names):
    cert = ca.issue_cert(*names)
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(ctx)
    return Server(ctx)


@pytest.fixture(scope="session")
def tls_server(ca):
    with _tls_server(ca, "127.0.0.1", "localhost") as s:
        yield s


@pytest.fixture(scope="session")
def wrong_host_tls_server(ca):
    """A TLS server whose certificate (from the test CA) names another host."""
    with _tls_server(ca, "other.example") as s:
        yield s


@pytest.fixture(scope="session")
def untrusted_tls_server():
    """A TLS server whose certificate comes from a CA nobody trusts."""
    with _tls_server(trustme.CA(), "127.0.0.1", "localhost") as s:
        yield s


@pytest.fixture()
def refused_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there any more
    return f"http://127.0.0.1:{port}/"


@pytest.fixture()
def blackhole_url():
    """A port whose accept queue is full: new connections hang in SYN_SENT (connect timeout)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(c)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        for c in fillers:
            c.close()
        listener.close()


@pytest.fixture(scope="session")
def fresh_python():
    """Run Python code in a new interpreter that sees this test's imports, with the client's
    REQUESTX_CLIENT_* settings cleared and then ``env`` applied (settings are read once per process)."""
    import subprocess

    def run(code: str, *args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        e = {k: v for k, v in os.environ.items() if not k.startswith("REQUESTX_CLIENT_")}
        e["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        e.update(env or {})
        return subprocess.run([sys.executable, "-c", code, *args], env=e, capture_output=True, text=True,
                              timeout=timeout)

    return run
