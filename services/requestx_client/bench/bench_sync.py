"""Synchronous client benchmark: one reused session/connection, N requests, optional threads.

    python bench/bench_sync.py --client requestx_client --scenario get --n 20000 [--threads 4]

Scenarios: get (13-byte body), post1k / post10k (JSON body of ~1 KB / ~10 KB), json1m (GET + .json() of
1 MB). An https `--url` is verified against `--cacert`, given to each client its own way. Prints one JSON
line: client, scenario, threads, requests, seconds, req_per_s.
Run each client in its own process (and in its own environment where a client swaps libraries)."""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any, Callable


def payload(size: int) -> Any:
    items, n = [], 0
    while n < size:
        item = {"id": len(items), "name": f"name-{len(items)}", "v": len(items) * 0.5}
        items.append(item)
        n += len(json.dumps(item)) + 2
    return {"items": items}


def _tls_context(cacert: str) -> Any:
    import ssl
    return ssl.create_default_context(cafile=cacert)


def make(client: str, base: str, scenario: str, cacert: str | None = None) -> Callable[[], Any]:
    """A zero-argument function doing one request of the scenario with `client` (session reused)."""
    url = base + ("/json-1mb" if scenario == "json1m" else "/post" if scenario.startswith("post") else "/")
    body = payload(1000 if scenario == "post1k" else 10000) if scenario.startswith("post") else None
    post = body is not None
    want_json = scenario == "json1m"

    if client in ("requestx_client", "requests", "niquests"):
        mod = __import__(client)
        s = mod.Session()
        if cacert:
            s.verify = cacert
        if post:
            return lambda: s.post(url, json=body).content
        if want_json:
            return lambda: s.get(url).json()
        return lambda: s.get(url).content
    if client in ("httpx", "requestx"):  # the original requestx has an httpx-style API
        c = __import__(client).Client(**({"verify": _tls_context(cacert)} if cacert else {}))
        if post:
            return lambda: c.post(url, json=body).content
        if want_json:
            return lambda: c.get(url).json()
        return lambda: c.get(url).content
    if client == "urllib3":
        import urllib3
        pool = urllib3.PoolManager(maxsize=16, **({"ca_certs": cacert} if cacert else {}))
        if post:
            return lambda: pool.request("POST", url, json=body).data
        if want_json:
            return lambda: pool.request("GET", url).json()
        return lambda: pool.request("GET", url).data
    if client == "pycurl":
        import io

        import pycurl
        local = threading.local()

        def handle() -> Any:
            c = getattr(local, "c", None)
            if c is None:
                c = local.c = pycurl.Curl()
                c.setopt(pycurl.URL, url)
                if cacert:
                    c.setopt(pycurl.CAINFO, cacert)
                if post:
                    c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json"])
            return c

        def once() -> Any:
            c = handle()
            buf = io.BytesIO()
            c.setopt(pycurl.WRITEDATA, buf)
            if post:
                c.setopt(pycurl.POSTFIELDS, json.dumps(body))
            c.perform()
            data = buf.getvalue()
            return json.loads(data) if want_json else data
        return once
    if client == "pyreqwest":
        from pyreqwest.client import SyncClientBuilder
        builder = SyncClientBuilder()
        if cacert:
            with open(cacert, "rb") as f:
                builder = builder.add_root_certificate_pem(f.read())
        c = builder.build()
        if post:
            return lambda: c.post(url).body_json(body).build().send().bytes()
        if want_json:
            return lambda: c.get(url).build().send().json()
        return lambda: c.get(url).build().send().bytes()
    raise SystemExit(f"unknown client {client}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True)
    ap.add_argument("--scenario", default="get", choices=["get", "post1k", "post10k", "json1m"])
    ap.add_argument("--url", default="http://127.0.0.1:18080")
    ap.add_argument("--n", type=int, default=20000, help="requests per thread")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--cacert", help="CA certificate (PEM) an https --url is verified against")
    args = ap.parse_args()

    fn = make(args.client, args.url, args.scenario, args.cacert)
    for _ in range(args.warmup):
        fn()

    def run() -> None:
        for _ in range(args.n):
            fn()

    threads = [threading.Thread(target=run) for _ in range(args.threads)]
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    total = args.n * args.threads
    cpu = time.process_time()
    line = {"client": args.client, "scenario": args.scenario, "threads": args.threads,
            "requests": total, "seconds": round(took, 3), "req_per_s": round(total / took, 1)}
    if args.client == "requestx_client":
        from requestx_client import _native
        line["sync_io"] = _native.sync_io_mode()
        line["spin_us"] = _native.spin_us()
    line["cpu_us_per_req"] = round((cpu - cpu0) / total * 1e6, 1)
    print(json.dumps(line))


if __name__ == "__main__":
    main()
