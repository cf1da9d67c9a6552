"""A small HTTP/1.1 keep-alive server for load tests: answers every request with 200 at once, except during a stall
window, when a request waits until the window ends (a server pause, as a GC or a lock would cause).

In the test process: ``StallServer(host, port).start()``, ``.stall(at_unix, seconds)``, ``.requests``, ``.close()``.
As a process (e.g. in another network namespace): ``python stall_server.py --host H --port 0`` prints
``listening on H:PORT`` and is controlled over HTTP:

    GET /_control/stall?at=UNIX_TIME&for=SECONDS   set the stall window (wall clock)
    GET /_control/count                            {"requests": N} (control requests are not counted)
"""

from __future__ import annotations

import argparse
import json
import socketserver
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # header and body go out at once either way; no 40 ms delayed-ACK stalls

    def do_GET(self):  # http.server calls it by this name
        srv: StallServer = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path.startswith("/_control/"):
            return self._control(srv)
        with srv.lock:
            srv.requests += 1
            start, end = srv.window
        now = time.time()
        if start <= now < end:
            time.sleep(end - now)
        self.wfile.write(_OK)

    do_POST = do_GET

    def _control(self, srv: StallServer) -> None:
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/_control/stall":
            srv.stall(float(q["at"]), float(q["for"]))
        with srv.lock:
            body = json.dumps({"requests": srv.requests, "stall": list(srv.window)}).encode()
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))

    def log_message(self, format, *args):  # quiet: thousands of requests a second
        pass


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class StallServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.lock = threading.Lock()
        self.requests = 0
        self.window = (0.0, 0.0)
        self._srv = _Server((host, port), _Handler)
        self._srv.owner = self
        self.host, self.port = self._srv.server_address[:2]
        self.url = f"http://{self.host}:{self.port}/"
        self._thread = threading.Thread(target=self._srv.serve_forever, name="stall-server", daemon=True)

    def start(self) -> StallServer:
        self._thread.start()
        return self

    def stall(self, at: float, seconds: float) -> None:
        """Requests arriving in [at, at + seconds) (wall clock) are answered at at + seconds."""
        with self.lock:
            self.window = (at, at + seconds)

    def reset(self) -> None:
        with self.lock:
            self.requests = 0

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args(argv)
    srv = StallServer(a.host, a.port)
    print(f"listening on {srv.host}:{srv.port}", flush=True)
    try:
        srv._srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
