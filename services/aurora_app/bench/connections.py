#!/usr/bin/env python3
"""Hold many concurrent keep-alive connections and report memory per connection.

    python3 bench/connections.py --aurora path/to/aurora_app [--connections 10000]

Opens N connections to one aurora worker, sends a request on each and keeps them
open, then sends a second request on every one of them (all must still be
served), and reports the server's resident memory growth per connection, the
connection-buffer gauge from /metrics, and the server's CPU use while the
connections sit idle.
"""
import argparse
import os
import re
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time

REQ = b"GET /plaintext HTTP/1.1\r\nHost: b\r\n\r\n"
RESP_LEN = None


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_trip(socks):
    """Send one request on every socket and wait for every full response."""
    sel = selectors.DefaultSelector()
    pending = {}
    for s in socks:
        s.sendall(REQ)
        pending[s] = b""
        sel.register(s, selectors.EVENT_READ)
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            data = s.recv(4096)
            if not data:
                raise RuntimeError("server closed a connection")
            pending[s] += data
            if pending[s].endswith(b"Hello, World!"):
                del pending[s]
                sel.unregister(s)
    sel.close()
    if pending:
        raise RuntimeError(f"{len(pending)} connections not answered")


def scrape(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aurora", required=True)
    ap.add_argument("--connections", type=int, default=10000)
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.connections + 1000
    if hard < need:
        sys.exit(f"RLIMIT_NOFILE hard limit {hard} < {need}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))

    proc = subprocess.Popen([args.aurora, "--port", "0", "--workers", "1",
                             "--max-connections", str(args.connections + 100),
                             "--idle-timeout-ms", "600000"], stdout=subprocess.PIPE, text=True)
    port = int(re.search(r":(\d+)", proc.stdout.readline()).group(1))
    socks = []
    try:
        base = rss_kib(proc.pid)
        t0 = time.monotonic()
        for i in range(args.connections):
            s = socket.create_connection(("127.0.0.1", port))
            socks.append(s)
            if len(socks) % 1000 == 0:
                round_trip(socks[-1000:])
        round_trip(socks[len(socks) // 1000 * 1000:])
        opened = time.monotonic() - t0
        held = rss_kib(proc.pid)
        round_trip(socks)  # every connection is still alive and served
        metrics = scrape(port)
        open_now = int(re.search(r"^aurora_connections_open\S* (\d+)", metrics, re.M).group(1))
        c0 = cpu_seconds(proc.pid)
        time.sleep(3)
        idle_cpu = (cpu_seconds(proc.pid) - c0) / 3 * 100
        time.sleep(1.1)  # let the gauge refresh
        metrics = scrape(port)
        buf = int(re.search(r"^aurora_connection_buffer_bytes\S* (\d+)", metrics, re.M).group(1))
        n = len(socks)
        print(f"connections held: {n} (server reports {open_now} open, incl. the scrape)")
        print(f"opened + first request on all: {opened:.1f} s; second request on all: ok")
        print(f"server RSS: {base} KiB idle -> {held} KiB with {n} connections: "
              f"{(held - base) * 1024 / n:.0f} bytes per connection")
        print(f"connection buffers (aurora_connection_buffer_bytes): {buf} bytes = {buf / n:.0f} per connection")
        print(f"server CPU while the {n} connections sit idle: {idle_cpu:.1f}% of one core")
    finally:
        for s in socks:
            s.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
