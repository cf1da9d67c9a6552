"""Command-line errors: a message on stderr and a non-zero exit, never a hang."""
import socket
import subprocess

import pytest

from rawhttp import start_server


@pytest.mark.parametrize("args,message", [
    (["--port", "abc"], "aurora_app:"),
    (["--port", "70000"], "aurora_app:"),
    (["--workers", "-1"], "aurora_app:"),
    (["--bogus"], "aurora_app:"),
    (["extra-arg"], "unexpected argument"),
    (["--host", "not-an-ip"], "invalid address for --host"),
    (["--host", "::1::2"], "invalid address for --host"),
    (["--idle-timeout-ms", "0"], "must be positive"),
    (["--request-timeout-ms", "0"], "must be positive"),
])
def test_bad_arguments(aurora_bin, args, message):
    r = subprocess.run([aurora_bin, "--port", "0", *args], capture_output=True, text=True, timeout=10)
    assert r.returncode != 0
    assert message in r.stderr
    assert "listening" not in r.stdout


def test_help(aurora_bin):
    r = subprocess.run([aurora_bin, "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    for flag in ("--host", "--port", "--workers", "--header-timeout-ms", "--request-timeout-ms", "--max-connections", "--no-metrics"):
        assert flag in r.stdout


def test_port_in_use_is_an_error(aurora_bin):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([aurora_bin, "--port", str(port)], capture_output=True, text=True, timeout=10)
        assert r.returncode == 1
        assert "already in use" in r.stderr


def test_second_instance_on_same_port_refused(aurora_bin):
    first = start_server(aurora_bin, "--workers", "2")
    try:
        r = subprocess.run([aurora_bin, "--port", str(first.port)], capture_output=True, text=True, timeout=10)
        assert r.returncode == 1 and "already in use" in r.stderr
    finally:
        assert first.stop() == 0


@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_ipv6_listener(aurora_bin, host):
    srv = start_server(aurora_bin, "--host", host, "--workers", "2")
    try:
        assert srv.host == "::1"
        with socket.create_connection(("::1", srv.port), timeout=5) as s:
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"Hello, World!")
        with pytest.raises(OSError):  # an IPv6 listener only: nothing on 127.0.0.1 at that port
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
    finally:
        assert srv.stop() == 0
