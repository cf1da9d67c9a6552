"""Real local test servers (threaded http.server, plain and TLS) with the routes the tests use."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import socket
import ssl
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

import brotli
import zstandard

CHUNK = b"x" * 65536

# Digest auth (RFC 7616), checked independently of the client: nonce -> highest nc seen and uses left
_DIGEST_HASH = {"MD5": hashlib.md5, "SHA-256": hashlib.sha256, "SHA-512-256": lambda b: hashlib.new("sha512_256", b)}
_digest_lock = threading.Lock()
_digest_nonces: dict[str, dict] = {}
_AUTH_PARAM = re.compile(r'(\w+)=(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))')


def _digest_params(header: str) -> dict:
    if not header.lower().startswith("digest "):
        return {}
    return {k.lower(): q or t for k, q, t in _AUTH_PARAM.findall(header[7:])}


def _digest_expected(p: dict, method: str, algorithm: str, qop: str, password: str) -> str:
    base = algorithm.upper().removesuffix("-SESS")
    h = lambda s: _DIGEST_HASH[base](s.encode()).hexdigest()  # noqa: E731
    ha1 = h(f"{p.get('username')}:{p.get('realm')}:{password}")
    if algorithm.upper().endswith("-SESS"):
        ha1 = h(f"{ha1}:{p.get('nonce')}:{p.get('cnonce')}")
    ha2 = h(f"{method}:{p.get('uri')}")
    if qop == "none":
        return h(f"{ha1}:{p.get('nonce')}:{ha2}")
    return h(f"{ha1}:{p.get('nonce')}:{p.get('nc')}:{p.get('cnonce')}:auth:{ha2}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "testserver"
    disable_nagle_algorithm = True

    def log_message(self, *args):  # keep test output clean
        pass

    # --- helpers ---
    def _body(self) -> bytes:
        return b"".join(self._body_pieces())

    def _body_pieces(self):
        """The request body in pieces as they are read, either framing."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                yield self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            piece = self.rfile.read(min(left, 65536))
            if not piece:
                return
            left -= len(piece)
            yield piece

    def _upload_digest(self):
        digest, size = hashlib.sha256(), 0
        for piece in self._body_pieces():
            digest.update(piece)
            size += len(piece)
        framing = "chunked" if "Transfer-Encoding" in self.headers else "length"
        self.send_json({"size": size, "sha256": digest.hexdigest(), "framing": framing})

    def send(self, status=200, body=b"", headers=(), content_type="application/json"):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, obj, status=200, headers=()):
        self.send(status, json.dumps(obj).encode(), headers)

    def _echo(self):
        parts = urlsplit(self.path)
        body = self._body()
        self.send_json({
            "method": self.command,
            "path": parts.path,
            "args": parse_qsl(parts.query, keep_blank_values=True),
            "headers": {k: v for k, v in self.headers.items()},
            "body": body.decode("latin-1"),
        })

    # --- dispatch ---
    def do_GET(self):
        self.route()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    def route(self):
        parts = urlsplit(self.path)
        path = parts.path
        q = dict(parse_qsl(parts.query))
        seg = path.strip("/").split("/")
        name = seg[0]
        if name in ("", "echo", "get", "post", "anything"):
            return self._echo()
        if name == "upload-digest":  # a large upload's size, SHA-256 and framing, read in pieces (not kept)
            return self._upload_digest()
        if name == "status":
            code = int(seg[1])
            if code in (204, 304):
                self.send_response(code)
                self.end_headers()
                return
            return self.send(code, b"status body", content_type="text/plain")
        if name == "redirect":
            n = int(seg[1])
            target = f"/redirect/{n - 1}" if n > 1 else "/echo"
            return self.send(302, b"", [("Location", target)])
        if name == "redirect-to":
            self._body()
            return self.send(int(q.get("status", 302)), b"", [("Location", q["url"])])
        if name == "loop":
            return self.send(302, b"", [("Location", "/loop")])
        if name == "cookies":
            if len(seg) > 1 and seg[1] == "set":
                hdrs = [("Set-Cookie", f"{k}={v}; Path=/") for k, v in q.items()]
                return self.send(302, b"", hdrs + [("Location", "/cookies")])
            if len(seg) > 1 and seg[1] == "delete":
                hdrs = [("Set-Cookie", f"{k}=; Max-Age=0; Path=/") for k in q]
                return self.send(200, b"{}", hdrs)
            return self.send_json({"cookie": self.headers.get("Cookie")})
        if name == "set-cookie":  # /set-cookie?h=<Set-Cookie value>&h=...[&next=<url>]: raw headers, then a redirect
            pairs = parse_qsl(parts.query)
            hdrs = [("Set-Cookie", v) for k, v in pairs if k == "h"]
            if "next" in q:
                return self.send(302, b"", hdrs + [("Location", q["next"])])
            return self.send_json({"cookie": self.headers.get("Cookie")}, headers=hdrs)
        if name in ("gzip", "deflate", "br", "zstd"):
            raw = json.dumps({"encoding": name, "data": "abc" * 1000}).encode()
            comp = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress,
                    "zstd": lambda b: zstandard.ZstdCompressor().compress(b)}[name](raw)
            return self.send(200, comp, [("Content-Encoding", name)])
        if name == "bad-gzip":
            return self.send(200, b"this is not gzip at all", [("Content-Encoding", "gzip")])
        if name == "text":  # /text/<charset-or-none>?...: 'héllo wörld €' encoded in the charset
            cs = seg[1]
            text = "héllo wörld"
            if cs == "none":
                return self.send(200, text.encode("utf-8"), content_type="text/plain")
            if cs == "binary":
                return self.send(200, b"caf\xe9 \xff\xfe bad", content_type="application/octet-stream")
            return self.send(200, text.encode(cs), content_type=f"text/plain; charset={cs}")
        if name == "latin1-as-utf8":
            return self.send(200, b"caf\xe9 \xff", content_type="text/plain; charset=utf-8")
        if name == "json-invalid":
            return self.send(200, b"{not: json", content_type="application/json")
        if name == "json-big":
            n = int(q.get("n", 1000))
            return self.send(200, json.dumps([{"id": i, "name": f"item{i}", "ok": True} for i in range(n)]).encode())
        if name == "slow-headers":
            time.sleep(float(q.get("delay", 2)))
            return self.send(200, b"late")
        if name == "slow-body":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"a" * 10)
            self.wfile.flush()
            time.sleep(float(q.get("delay", 2)))
            return
        if name == "reset":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"b" * 1000)
            self.wfile.flush()
            time.sleep(0.05)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if name == "big":
            size = int(q["size"])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            left = size
            while left > 0:
                n = min(left, len(CHUNK))
                self.wfile.write(CHUNK[:n] if n < len(CHUNK) else CHUNK)
                left -= n
            return
        if name == "chunked-lines":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b"line one\nline ", b"two\n", b"", b"line three\nlast"):
                if piece:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        if name == "basic-auth":
            import base64
            expected = "Basic " + base64.b64encode(f"{seg[1]}:{seg[2]}".encode()).decode()
            if self.headers.get("Authorization") == expected:
                return self.send_json({"authenticated": True})
            return self.send(401, b"{}", [("WWW-Authenticate", 'Basic realm="t"')])
        if name == "bearer":
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Bearer "):
                return self.send_json({"token": auth[7:]})
            return self.send(401, b"{}")
        if name == "reflect":  # the request body back, as Content-Type ?ct= (default application/json)
            return self.send(200, self._body(), content_type=q.get("ct", "application/json"))
        if name == "digest":  # /digest/<qop: auth|none>/<algorithm>/<user>/<password>[?uses=N][&cookie=1]
            return self._digest(seg[1], seg[2], unquote(seg[3]), unquote(seg[4]), int(q.get("uses", 100)), "cookie" in q)
        if name == "headers-multi":
            return self.send(200, b"{}", [("X-Multi", "a"), ("X-Multi", "b"), ("x-case", "Yes")])
        self.send(404, b"not found", content_type="text/plain")


    def _digest(self, qop, algorithm, user, password, uses, set_cookie):
        body = self._body()
        p = _digest_params(self.headers.get("Authorization", ""))
        stale = False
        if p:
            with _digest_lock:
                state = _digest_nonces.get(p.get("nonce", ""))
                nc = int(p.get("nc", "0"), 16) if qop != "none" else 0
                ok = (state is not None and p.get("username") == user and p.get("realm") == "tests@requestx"
                      and p.get("uri") == self.path and p.get("opaque") == state["opaque"]
                      and (p.get("algorithm") or "MD5").upper() == algorithm.upper()
                      and (qop == "none" or (p.get("qop") == "auth" and nc > state["nc"]))
                      and p.get("response") == _digest_expected(p, self.command, algorithm, qop, password))
                if ok and state["uses"] >= uses:
                    ok, stale = False, True
                if ok:
                    state["nc"], state["uses"] = nc, state["uses"] + 1
            if ok:
                return self.send_json({"authenticated": True, "user": user, "nc": nc,
                                       "cookie": self.headers.get("Cookie"), "body": body.decode("latin-1")})
        nonce, opaque = os.urandom(12).hex(), os.urandom(6).hex()
        with _digest_lock:
            _digest_nonces[nonce] = {"nc": 0, "uses": 0, "opaque": opaque}
        challenge = f'Digest realm="tests@requestx", nonce="{nonce}", opaque="{opaque}", algorithm={algorithm}'
        if qop != "none":
            challenge += ', qop="auth,auth-int"'
        if stale:
            challenge += ", stale=TRUE"
        hdrs = [("WWW-Authenticate", 'Basic realm="other", charset="UTF-8"'), ("WWW-Authenticate", challenge)]
        if set_cookie:
            hdrs.append(("Set-Cookie", "probe=1; Path=/"))
        return self.send(401, b"{}", hdrs)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):  # clients hanging up early is what the tests do
        pass


class Server:
    def __init__(self, tls_context: ssl.SSLContext | None = None) -> None:
        self.httpd = _HTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls_context is not None:
            self.httpd.socket = tls_context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        scheme = "https" if tls_context else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.localhost_url = f"{scheme}://localhost:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *a) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class RawServer:
    """A one-connection-at-a-time HTTP/1.1 server on a raw socket. `answer(conn_no, req_no, head)`
    returns the bytes to send for the req_no-th request (0-based) of the conn_no-th connection, a
    1-tuple (bytes,) to send them and then close the connection, a list of bytes to send piece by piece
    (each its own segment, 2 ms apart), or None to close it without answering.
    With `tls_context`, each connection is TLS (closed without close_notify, as a crashing server would)."""

    def __init__(self, answer, tls_context: ssl.SSLContext | None = None):
        self.answer = answer
        self.tls_context = tls_context
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        scheme = "https" if tls_context else "http"
        self.url = f"{scheme}://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *a):
        self.sock.close()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            n = self.connections
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn, n), daemon=True).start()

    def _handle(self, conn, n):
        if self.tls_context is not None:
            try:
                conn = self.tls_context.wrap_socket(conn, server_side=True)
            except OSError:  # the client refused the handshake or hung up
                conn.close()
                return
        buf = b""
        req_no = 0
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                self.requests.append(head)
                out = self.answer(n, req_no, head)
                req_no += 1
                if out is None:
                    return
                if isinstance(out, tuple):
                    conn.sendall(out[0])
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                if isinstance(out, list):
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    for piece in out:
                        conn.sendall(piece)
                        time.sleep(0.002)
                    continue
                conn.sendall(out)


def ok(body=b"hello", extra=b""):
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)
