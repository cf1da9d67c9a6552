"""https on the direct path (rustls over a pooled blocking socket): connection reuse, one pool per TLS
setting, a server's close_notify on an idle connection, handshake failures and timeouts, and the stage
timings of a new connection. The hostile-server cases of test_hostile.py run over TLS as well."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest

import requestx_client as requests
from requestx_client import _native
from requestx_client import exceptions as exc
from servers import RawServer, ok

pytestmark = pytest.mark.skipif(_native.sync_io_mode() != "direct", reason="REQUESTX_CLIENT_SYNC_IO is not direct")


@pytest.fixture
def tls_ctx(ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
    return ctx


def test_keep_alive_reuses_one_tls_connection(tls_ctx, ca_file):
    with RawServer(lambda c, r, h: ok(b"r%d" % r), tls_ctx) as srv, requests.Session() as s:
        got = [s.get(srv.url + "/x", verify=ca_file).content for _ in range(5)]
        assert got == [b"r0", b"r1", b"r2", b"r3", b"r4"]
        assert srv.connections == 1 and s._native.direct_idle_count() == 1
        assert s.post(srv.url, data=b"x" * 200_000, verify=ca_file).content == b"r5"  # a body past one record
        assert srv.connections == 1


def test_connections_are_not_shared_across_tls_settings(tls_ctx, ca_file):
    with RawServer(lambda c, r, h: ok(b"c%dr%d" % (c, r)), tls_ctx) as srv, requests.Session() as s:
        assert s.get(srv.url, verify=ca_file).content == b"c0r0"
        assert s.get(srv.url, verify=False).content == b"c1r0"  # verify=False never rides a verified connection
        assert s.get(srv.url, verify=ca_file).content == b"c0r1"
        assert s.get(srv.url, verify=False).content == b"c1r1"
        assert srv.connections == 2


def _close_notify_after_first_answer(tls_ctx):
    """A TLS server that answers one request per connection, then sends close_notify and closes."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    count = [0]

    def handle(raw, n):
        with tls_ctx.wrap_socket(raw, server_side=True) as conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            conn.sendall(ok(b"n%d" % n))
            conn.settimeout(0.5)
            try:
                conn.unwrap()  # sends close_notify at once, then waits (briefly) for the client's
            except OSError:
                pass

    def serve():
        while True:
            try:
                raw, _ = sock.accept()
            except OSError:
                return
            count[0] += 1
            threading.Thread(target=handle, args=(raw, count[0]), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return sock, count


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_close_notify_on_an_idle_connection_costs_a_new_one_not_an_error(tls_ctx, ca_file, method):
    sock, count = _close_notify_after_first_answer(tls_ctx)
    url = "https://127.0.0.1:%d/" % sock.getsockname()[1]
    try:
        with requests.Session() as s:
            assert s.request(method, url, verify=ca_file, timeout=5).content == b"n1"
            time.sleep(0.2)  # the close_notify arrives while the connection is idle in the pool
            assert s.request(method, url, verify=ca_file, timeout=5).content == b"n2"
            assert count[0] == 2
    finally:
        sock.close()


def test_untrusted_and_wrong_name_certificates_are_ssl_errors(ca, tls_ctx, ca_file):
    with RawServer(lambda c, r, h: ok(), tls_ctx) as srv:
        with pytest.raises(exc.SSLError):
            requests.get(srv.url, timeout=5)  # the test CA is not in the default roots
        assert requests.get(srv.url, verify=ca_file, timeout=5).status_code == 200
    other = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("other.example").configure_cert(other)
    with RawServer(lambda c, r, h: ok(), other) as srv:
        with pytest.raises(exc.SSLError):
            requests.get(srv.url, verify=ca_file, timeout=5)  # 127.0.0.1 is not a name on the certificate


def test_an_http_server_on_an_https_url_is_an_ssl_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    def answer_400():  # what an HTTP/1.1 server says to a ClientHello
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=answer_400, daemon=True).start()
    try:
        with pytest.raises(exc.SSLError):
            requests.get("https://127.0.0.1:%d/" % sock.getsockname()[1], timeout=5)
    finally:
        sock.close()


def test_a_stalled_handshake_ends_at_the_connect_timeout():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)  # the kernel completes TCP; nobody ever answers the ClientHello
    try:
        t0 = time.monotonic()
        with pytest.raises(exc.ConnectTimeout):
            requests.get("https://127.0.0.1:%d/" % sock.getsockname()[1], timeout=(0.3, 10))
        assert time.monotonic() - t0 < 3
    finally:
        sock.close()


def test_a_read_timeout_after_the_handshake_is_a_read_timeout(tls_ctx, ca_file):
    with RawServer(lambda c, r, h: (time.sleep(1.0), ok())[1], tls_ctx) as srv:
        with pytest.raises(exc.ReadTimeout):
            requests.get(srv.url, verify=ca_file, timeout=(5, 0.2))


def test_timings_of_a_new_connection_include_the_handshake(tls_ctx, ca_file):
    with RawServer(lambda c, r, h: ok(), tls_ctx) as srv:
        native = _native.Client()
        first = native.request("GET", srv.url, verify=ca_file, timing=True).timings
        again = native.request("GET", srv.url, verify=ca_file, timing=True).timings
    pool_wait, connect, tls, ttfb, transfer, _ = first
    assert connect is not None and tls is not None and tls > 0 and ttfb is not None and transfer is not None
    assert again[1] is None and again[2] is None  # reused: no connect, no handshake
