"""HTTPS: aurora_app with --tls-cert/--tls-key against real TLS clients (Python's ssl module, which is OpenSSL,
and curl), and against peers that do not speak TLS or stop half-way."""
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time

import pytest

from rawhttp import Reader, get


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    """A self-signed certificate for localhost / 127.0.0.1 and its key (PEM), made by the openssl command."""
    d = tmp_path_factory.mktemp("tls")
    crt, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return str(crt), str(key)


@pytest.fixture
def tls_server(make_server, cert):
    def make(*flags, workers: int = 1):
        return make_server("--tls-cert", cert[0], "--tls-key", cert[1], *flags, workers=workers)
    return make


@pytest.fixture
def client_ctx(cert):
    ctx = ssl.create_default_context(cafile=cert[0])
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    return ctx


def tls_connect(server, ctx, **kw) -> ssl.SSLSocket:
    raw = server.connect()
    return ctx.wrap_socket(raw, server_hostname="localhost", **kw)


def test_requests_over_tls_keep_the_connection(tls_server, client_ctx):
    srv = tls_server()
    with tls_connect(srv, client_ctx) as s:
        assert s.version() == "TLSv1.3"
        assert s.selected_alpn_protocol() == "http/1.1"  # offered h2 first: this server speaks HTTP/1.1
        r = Reader(s)
        for _ in range(5):
            s.sendall(get("/plaintext"))
            res = r.read_response()
            assert res.status == 200 and res.body == b"Hello, World!"
        s.sendall(get("/users/42"))
        res = r.read_response()
        assert res.status == 200 and b'"id":42' in res.body


def test_tls12_clients_are_served(tls_server, client_ctx):
    client_ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with tls_connect(tls_server(), client_ctx) as s:
        assert s.version() == "TLSv1.2"
        s.sendall(get("/json"))
        assert Reader(s).read_response().body == b'{"message":"Hello, World!"}'


def test_pipelined_requests_over_tls(tls_server, client_ctx):
    with tls_connect(tls_server(), client_ctx) as s:
        s.sendall(b"".join(get(f"/users/{i}") for i in range(200)))
        r = Reader(s)
        for i in range(200):
            res = r.read_response()
            assert res.status == 200 and f'"id":{i},'.encode() in res.body


def test_request_bodies_across_many_records(tls_server, client_ctx):
    body = os.urandom(60_000).hex().encode()[:60_000]
    with tls_connect(tls_server(), client_ctx) as s:
        s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body))
        for i in range(0, len(body), 1000):  # many small TLS records
            s.sendall(body[i:i + 1000])
        res = Reader(s).read_response()
        assert res.status == 200 and res.body == body


def test_a_large_file_goes_through_tls_with_range(make_server, cert, client_ctx, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17)
    (tmp_path / "big.bin").write_bytes(data)
    srv = make_server("--tls-cert", cert[0], "--tls-key", cert[1], "--static-dir", str(tmp_path))
    with tls_connect(srv, client_ctx) as s:
        r = Reader(s)
        s.sendall(get("/static/big.bin"))
        res = r.read_response()
        assert res.status == 200 and res.body == data
        s.sendall(get("/static/big.bin", extra="Range: bytes=1000000-2000000\r\n"))
        res = r.read_response()
        assert res.status == 206 and res.body == data[1000000:2000001]
        s.sendall(get("/plaintext"))  # the connection is still in step
        assert r.read_response().body == b"Hello, World!"


def test_a_slow_reader_gets_every_byte_of_a_stream(tls_server, client_ctx):
    n, size = 200, 16_000
    with tls_connect(tls_server(), client_ctx) as s:
        s.sendall(get(f"/stream?n={n}&size={size}"))
        time.sleep(0.5)  # the server meets a full socket and waits for this reader
        res = Reader(s).read_response()
        assert res.status == 200 and len(res.chunks) == n
        assert res.body == b"".join(b"line %d " % i + b"x" * size + b"\n" for i in range(n))


def test_offloaded_work_over_tls(tls_server, client_ctx):
    with tls_connect(tls_server(), client_ctx) as s:
        s.sendall(get("/offload?ms=5") + get("/plaintext"))
        r = Reader(s)
        assert r.read_response().status == 200
        assert r.read_response().body == b"Hello, World!"


def test_sessions_resume(tls_server, client_ctx):
    srv = tls_server()
    with tls_connect(srv, client_ctx) as s:
        s.sendall(get("/plaintext"))
        Reader(s).read_response()  # TLS 1.3 tickets arrive after the handshake: read once
        session = s.session
        assert not s.session_reused
    with tls_connect(srv, client_ctx, session=session) as s:
        assert s.session_reused
        s.sendall(get("/plaintext"))
        assert Reader(s).read_response().status == 200


def test_curl_over_https(tls_server, cert):
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    srv = tls_server()
    out = subprocess.run([curl, "-sS", "--cacert", cert[0], "-w", " %{http_version} %{response_code}",
                          f"https://localhost:{srv.port}/plaintext", f"https://localhost:{srv.port}/json"],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout == 'Hello, World! 1.1 200{"message":"Hello, World!"} 1.1 200'


def _closed_soon(sock: socket.socket, within: float) -> bool:
    """Whether the server closes `sock` within `within` seconds (whatever it sends first is ignored)."""
    sock.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if not sock.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    return False


@pytest.mark.parametrize("junk", [
    get("/plaintext"),                        # plain HTTP to the TLS port
    b"\x16\x03\x01\x00\x05hello",             # a handshake record that is not a ClientHello
    b"\x16\x03\x01\x40\x00" + b"\x00" * 100,  # a ClientHello announced but cut short: the header timeout
    bytes(range(256)) * 4,
])
def test_peers_that_do_not_speak_tls_are_dropped(tls_server, client_ctx, junk):
    srv = tls_server("--header-timeout-ms", "500")
    s = srv.connect()
    s.sendall(junk)
    assert _closed_soon(s, 5.0)
    s.close()
    with tls_connect(srv, client_ctx) as t:  # the server is unharmed
        t.sendall(get("/plaintext"))
        assert Reader(t).read_response().status == 200


def test_a_silent_connection_gets_the_header_timeout(tls_server):
    srv = tls_server("--header-timeout-ms", "300", "--idle-timeout-ms", "60000")
    s = srv.connect()
    t0 = time.monotonic()
    assert _closed_soon(s, 5.0)
    assert time.monotonic() - t0 < 3.0  # the header timeout, not the idle one
    s.close()


def test_a_client_that_leaves_mid_handshake(tls_server, client_ctx):
    srv = tls_server()
    for _ in range(20):
        s = srv.connect()
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
        s.close()
    with tls_connect(srv, client_ctx) as t:
        t.sendall(get("/plaintext"))
        assert Reader(t).read_response().status == 200
    assert srv.proc.poll() is None


def test_concurrent_tls_clients(tls_server, client_ctx):
    srv = tls_server(workers=2)
    failures = []

    def client(i):
        try:
            with tls_connect(srv, client_ctx) as s:
                r = Reader(s)
                for j in range(20):
                    s.sendall(get(f"/users/{i * 100 + j}"))
                    res = r.read_response()
                    assert res.status == 200 and f'"id":{i * 100 + j},'.encode() in res.body
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert failures == []


def test_a_closing_response_sends_close_notify(tls_server, client_ctx):
    with tls_connect(tls_server(), client_ctx) as s:
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        r = Reader(s)
        assert r.read_response().body == b"Hello, World!"
        assert s.recv(100) == b""  # a clean TLS close (close_notify), not a truncation error


@pytest.mark.parametrize("flags, message", [
    (["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"], "cannot load the TLS certificate"),
    (["--tls-key", "k.pem"], "needs both a certificate"),
])
def test_bad_tls_settings_are_refused(aurora_bin, flags, message):
    out = subprocess.run([aurora_bin, "--port", "0", *flags], capture_output=True, text=True, timeout=20)
    assert out.returncode == 2 and message in out.stderr


def test_a_key_that_does_not_match_is_refused(aurora_bin, cert, tmp_path):
    other = tmp_path / "other.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-out", str(other)], check=True, capture_output=True)
    out = subprocess.run([aurora_bin, "--port", "0", "--tls-cert", cert[0], "--tls-key", str(other)],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 2 and "cannot load the TLS key" in out.stderr and "mismatch" in out.stderr


def test_tls_over_ipv6(aurora_bin, cert, client_ctx):
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    proc = subprocess.Popen([aurora_bin, "--host", "::1", "--port", "0", "--workers", "1", "--tls-cert", cert[0],
                             "--tls-key", cert[1]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if "listening on" not in line:
            pytest.skip(f"no IPv6 loopback here: {line!r}")
        port = int(line.split("]:")[1].split()[0])
        client_ctx.check_hostname = False  # the certificate names 127.0.0.1 and localhost
        with client_ctx.wrap_socket(socket.create_connection(("::1", port), timeout=5)) as s:
            s.sendall(get("/plaintext"))
            assert Reader(s).read_response().body == b"Hello, World!"
    finally:
        proc.terminate()
        proc.wait(10)
