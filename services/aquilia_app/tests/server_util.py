"""Start the real server as a subprocess on an ephemeral port (and always stop it)."""
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")


def child_env(extra=None):
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([SRC] + [p for p in sys.path if p])
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("AQUILIA_APP_DB", None)
    if extra:
        env.update(extra)
    return env


def _stop(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@contextlib.contextmanager
def running_server(*args, env=None, timeout=20.0):
    proc = subprocess.Popen([sys.executable, "-m", "aquilia_app", "--host", "127.0.0.1", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(env), cwd=ROOT,
                            start_new_session=True)
    try:
        line = proc.stdout.readline().decode()
        m = re.search(r"listening on http://([^:]+):(\d+)", line)
        if not m:
            raise RuntimeError(f"server did not start: {line!r} {proc.stderr.read(2000)!r}")
        port = int(m.group(2))
        deadline = time.monotonic() + timeout
        while True:  # wait until the app answers (lifespan done)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    if s.recv(64).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                _stop(proc)  # before reading stderr: a live server never closes it
                raise RuntimeError(f"server not ready: {proc.stderr.read(4000)!r}")
            time.sleep(0.05)
        yield port, proc
    finally:
        _stop(proc)
        proc.stdout.close()
        proc.stderr.close()


def raw_request(port, data: bytes, timeout=5.0) -> bytes:
    """Send raw bytes, return everything the server answers until it closes (or the timeout)."""
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    return out


def status_of(raw: bytes) -> int:
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw)
    return int(m.group(1)) if m else -1


def read_response(sock) -> tuple:
    """One HTTP/1.1 response with a Content-Length from ``sock``: (status, {lower-case name: value},
    body), or (-1, {}, b"") when the server closed the connection first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return -1, {}, b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        return status_of(head), headers, _read_chunked(sock, body)
    size = int(headers.get("content-length", "0"))
    while len(body) < size:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status_of(head), headers, body


def _read_chunked(sock, data: bytes) -> bytes:
    """The decoded body of a chunked response whose first bytes are ``data``."""
    body = b""
    while True:
        while b"\r\n" not in data:
            data += sock.recv(65536)
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        while len(data) < size + 2:
            more = sock.recv(65536)
            if not more:
                return body + data
            data += more
        if size == 0:
            return body
        body, data = body + data[:size], data[size + 2:]
