"""Memory over many requests on one session: RSS and open file descriptors printed every `--every`
requests. With `--hosts N` the requests go round-robin to N distinct loopback addresses (127.0.x.y, all
served by `bench/nginx.py --any-loopback`): more hosts than the pools keep, so connections are opened and
evicted all along — what a crawler does.

    python bench/bench_memory.py --n 1000000 --every 100000
    python bench/bench_memory.py --n 1000000 --every 100000 --hosts 1000
    python bench/bench_memory.py --url https://127.0.0.1:18443/ --cacert ca.pem --n 200000 --every 20000 --hosts 1000

Over https (`bench/nginx.py --any-loopback --tls-port 18443 --ca-out ca.pem`: its certificate names every
address used here) with more hosts than the pools and the TLS session cache keep, each request makes a
new connection with a full handshake.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from urllib.parse import urlsplit

import requestx_client


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def loopback_urls(url: str, hosts: int) -> list[str]:
    """``url`` on ``hosts`` distinct addresses 127.0.x.y (x.y from 0.1, skipping .0 and .255)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    path = parts.path or "/"
    return [f"{parts.scheme}://127.0.{i // 254}.{i % 254 + 1}{port}{path}" for i in range(hosts)]


def report(i: int, t0: float) -> None:
    print(json.dumps({"requests": i, "rss_mib": round(rss_mib(), 1), "open_fds": open_fds(),
                      "seconds": round(time.perf_counter() - t0, 1)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:18080/")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=1, help="distinct loopback addresses, round-robin")
    ap.add_argument("--cacert", help="CA certificate (PEM) an https --url is verified against")
    args = ap.parse_args()
    urls = loopback_urls(args.url, args.hosts) if args.hosts > 1 else [args.url]
    s = requestx_client.Session()
    if args.cacert:
        s.verify = args.cacert
    t0 = time.perf_counter()
    report(0, t0)
    for i in range(1, args.n + 1):
        s.get(urls[i % len(urls)]).content
        if i % args.every == 0:
            report(i, t0)


if __name__ == "__main__":
    main()
