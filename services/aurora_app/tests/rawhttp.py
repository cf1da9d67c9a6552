"""Raw-socket HTTP/1.1 helpers shared by the aurora_app tests (no HTTP client library:
the tests must see exactly the bytes on the wire)."""
import socket
import subprocess
import time
import os
import re
import signal


class Server:
    def __init__(self, proc: subprocess.Popen, host: str, port: int):
        self.proc = proc
        self.host = host
        self.port = port

    def connect(self, timeout: float = 5.0) -> socket.socket:
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_server(binary: str, *flags: str, env: dict | None = None) -> Server:
    """Start the server on an ephemeral port; ``env``: variables added to this process's environment."""
    proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=None if env is None else {**os.environ, **env})
    line = proc.stdout.readline()
    m = re.match(r"listening on \[?([\d.a-fA-F:]+?)\]?:(\d+) ", line)
    if not m:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"server did not start: {line!r} {out!r} {err!r}")
    return Server(proc, m.group(1), int(m.group(2)))


# ---------------------------------------------------------------- raw HTTP helpers

class Response:
    def __init__(self, status: int, reason: str, headers: list, body: bytes):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def header(self, name: str):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:80]!r}>"


class Reader:
    """Reads HTTP/1.1 responses (Content-Length framed) off a socket."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def read_response(self, head_only: bool = False) -> Response:
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise EOFError(f"connection closed; buffered {self.buf!r}")
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        version, code, reason = lines[0].split(" ", 2)
        assert version in ("HTTP/1.1",), lines[0]
        headers = [tuple(x.strip() for x in l.split(":", 1)) for l in lines[1:]]
        resp = Response(int(code), reason, headers, b"")
        if resp.status == 100:
            return self.read_response(head_only)
        if head_only:
            return resp
        if resp.header("Transfer-Encoding") == "chunked":
            resp.chunks = self._read_chunks()
            resp.body = b"".join(resp.chunks)
            return resp
        if resp.header("Content-Length") is None:  # ends with the connection
            while self._fill():
                pass
            resp.body, self.buf = self.buf, b""
            return resp
        n = int(resp.header("Content-Length"))
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError("connection closed inside a body")
        resp.body, self.buf = self.buf[:n], self.buf[n:]
        return resp

    def _read_line(self) -> bytes:
        while b"\r\n" not in self.buf:
            if not self._fill():
                raise EOFError("connection closed inside a chunked body")
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read_chunks(self) -> list:
        """The chunks of a chunked body (strict: hex sizes, CRLF after each, no trailers expected)."""
        chunks = []
        while True:
            size = int(self._read_line(), 16)
            if size == 0:
                assert self._read_line() == b"", "trailers or a missing final CRLF"
                return chunks
            while len(self.buf) < size + 2:
                if not self._fill():
                    raise EOFError("connection closed inside a chunk")
            assert self.buf[size:size + 2] == b"\r\n", "chunk data not followed by CRLF"
            chunks.append(self.buf[:size])
            self.buf = self.buf[size + 2:]

    def at_eof(self, timeout: float = 3.0) -> bool:
        """True if the server closes the connection (and sends nothing more)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return not self.buf
                self.buf += chunk
        except ConnectionResetError:
            return not self.buf
        except socket.timeout:
            return False


def get(path: str, host: str = "t", extra: str = "", method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()


def request(server: Server, raw: bytes, head_only: bool = False) -> Response:
    with server.connect() as s:
        s.sendall(raw)
        return Reader(s).read_response(head_only)


def metric_value(server: Server, name: str) -> float:
    body = request(server, get("/metrics")).body.decode()
    for line in body.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def metric_sum(server: Server, name: str) -> float:
    """The sum of every series of a metric (all label sets)."""
    body = request(server, get("/metrics")).body.decode()
    values = [float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
              if line.startswith(name + "{") or line.startswith(name + " ")]
    if not values:
        raise AssertionError(f"{name} not in /metrics")
    return sum(values)


def wait_until(pred, timeout: float = 5.0, step: float = 0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
