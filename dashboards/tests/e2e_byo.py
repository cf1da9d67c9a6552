"""A service none of the dashboards knows by name, for the end-to-end test (e2e_stack.py): an HTTP server that
records the standard server histogram, and an HTTP client, in the same process, that calls it and records the
standard client histograms — with the kit's Python metrics package, as a user's own service would
(perfkit/metrics/README.md).

    python e2e_byo.py [--service e2e_byo] [--rate 40]

Prints "listening on http://127.0.0.1:PORT" (port chosen by the OS); GET /metrics is the exposition, GET /hello
answers 200, anything else 404. The client sends --rate requests/s to /hello (one in ten to /missing, a 4xx),
on a keep-alive connection that it replaces every 20 requests (so that connect is a stage seen now and then).
"""
from __future__ import annotations

import argparse
import http.client
import http.server
import json
import sys
import threading
import time

from perfkit_metrics import Registry

METRICS = Registry()
SERVICE = "e2e_byo"
SERVER = CLIENT = None  # the standard families, made in main() once the service name is known


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (http.server's name)
        t0 = time.perf_counter()
        if self.path == "/metrics":
            self._answer(200, *METRICS.exposition(self.headers.get("Accept")))
            return
        if self.path == "/hello":
            status, route, body = 200, "/hello", json.dumps({"hello": "world"}).encode()
        else:
            status, route, body = 404, "<unmatched>", b'{"error": "not found"}'
        self._answer(status, body, "application/json")
        SERVER.observe(route, "GET", status, time.perf_counter() - t0)

    def _answer(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def client_loop(port: int, rate: float) -> None:
    host = f"127.0.0.1:{port}"
    conn, n = None, 0
    while True:
        n += 1
        path = "/missing" if n % 10 == 0 else "/hello"
        t0 = time.perf_counter()
        status, stages = 0, [None] * 6  # perfkit_metrics.STAGES order
        try:
            if conn is None or n % 20 == 0:
                if conn is not None:
                    conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.connect()
                stages[1] = time.perf_counter() - t0
            t1 = time.perf_counter()
            conn.request("GET", path)
            resp = conn.getresponse()
            t2 = time.perf_counter()
            body = resp.read()
            t3 = time.perf_counter()
            json.loads(body)
            t4 = time.perf_counter()
            status = resp.status
            stages[3:6] = t2 - t1, t3 - t2, t4 - t3  # ttfb, transfer, decode
        except (OSError, http.client.HTTPException, ValueError):
            conn = None
        CLIENT.observe_request("GET", host, status, time.perf_counter() - t0, stages)
        time.sleep(max(0.0, 1.0 / rate - (time.perf_counter() - t0)))


def main(argv=None) -> int:
    global SERVER, CLIENT
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--service", default=SERVICE)
    p.add_argument("--rate", type=float, default=40.0)
    a = p.parse_args(argv)
    # a thread per connection: the server family is recorded from several threads
    SERVER, CLIENT = METRICS.http_server(a.service, threadsafe=True), METRICS.http_client(a.service)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=client_loop, args=(port, a.rate), daemon=True).start()
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
