"""Drive one HTTP client library against a URL for a while; print one JSON line of figures.

    python client_driver.py --client requests --url http://127.0.0.1:PORT/ --duration 2 [--warmup 0.5]

Standalone on purpose (run by file path in its own process, pinned by the bench): it imports only the
client under test and hdrh. One session/connection, requests issued back to back (the client's own
per-request cost is what is measured). Output: {"client", "version", "requests", "errors", "seconds",
"rps", "latency_us": {p50, p90, p99, p99_9, max}, "peak_rss_bytes", "cpu_seconds", "urllib3"}, where
"urllib3" says which distribution the `urllib3` module this process imported came from ("urllib3 2.5.0",
"urllib3-future 2.14.906", or "" when the client never imported it): the proof of which environment ran.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import resource
import sys
import time

# run by file path: keep the kit's own modules (stats, procs, ...) from shadowing anything
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

DISTS = {"requestx_client": "requestx-client", "pycurl": "pycurl", "pyreqwest": "pyreqwest"}


def _tls_context(cacert: str):
    import ssl
    return ssl.create_default_context(cafile=cacert)


def make_sync(client: str, url: str, method: str, body: bytes | None, cacert: str | None = None):
    """One request function per client; ``cacert``: the CA that https URLs are verified against, given to
    each client its own way (never verification turned off)."""
    if client in ("requests", "requestx_client", "niquests"):
        mod = __import__(client)
        sess = mod.Session()
        # per request: requests lets REQUESTS_CA_BUNDLE from the environment override a session's verify
        tls = {"verify": cacert} if cacert else {}

        def once():
            r = sess.request(method, url, data=body, **tls)
            r.content
            return r.status_code
        return once
    if client in ("httpx", "requestx"):
        # the original requestx (1.x) follows httpx's API (Client, content=), not requests'
        c = __import__(client).Client(**({"verify": _tls_context(cacert) if client == "httpx" else cacert}
                                          if cacert else {}))

        def once():
            r = c.request(method, url, content=body)
            r.content
            return r.status_code
        return once
    if client == "urllib3":
        import urllib3
        pool = urllib3.PoolManager(maxsize=1, **({"cert_reqs": "CERT_REQUIRED", "ca_certs": cacert} if cacert else {}))

        def once():
            r = pool.request(method, url, body=body)
            return r.status
        return once
    if client == "pycurl":
        import io

        import pycurl
        c = pycurl.Curl()
        c.setopt(pycurl.URL, url)
        c.setopt(pycurl.CUSTOMREQUEST, method)
        if cacert:
            c.setopt(pycurl.CAINFO, cacert)
        if body is not None:
            c.setopt(pycurl.POSTFIELDS, body)

        def once():
            buf = io.BytesIO()
            c.setopt(pycurl.WRITEDATA, buf)
            c.perform()
            return c.getinfo(pycurl.RESPONSE_CODE)
        return once
    if client == "pyreqwest":
        from pyreqwest.client import SyncClientBuilder
        builder = SyncClientBuilder()
        if cacert:
            with open(cacert, "rb") as f:
                builder = builder.add_root_certificate_pem(f.read())
        c = builder.build()

        def once():
            req = c.request(method, url)
            if body is not None:
                req = req.body_bytes(body)
            r = req.build().send()
            r.bytes()
            return r.status
        return once
    return None


def run_async(client: str, url: str, method: str, body: bytes | None, warmup: float, duration: float, rec,
              cacert: str | None = None):
    import asyncio

    async def main():
        import aiohttp
        conn = aiohttp.TCPConnector(limit=1, **({"ssl": _tls_context(cacert)} if cacert else {}))
        async with aiohttp.ClientSession(connector=conn) as sess:
            async def once():
                async with sess.request(method, url, data=body) as r:
                    await r.read()
                    return r.status
            return await _loop_async(once, warmup, duration, rec)

    return asyncio.run(main())


async def _loop_async(once, warmup, duration, rec):
    t_end = time.perf_counter() + warmup
    while time.perf_counter() < t_end:
        await once()
    n = errors = 0
    t0 = time.perf_counter()
    t_end = t0 + duration
    now = t0
    while now < t_end:
        try:
            status = await once()
            if not 200 <= status < 300:
                errors += 1
        except Exception:  # noqa: BLE001 - counted as an error
            errors += 1
        t1 = time.perf_counter()
        rec(int((t1 - now) * 1e6))
        n += 1
        now = t1
    return n, errors, now - t0


def _loop_sync(once, warmup, duration, rec):
    t_end = time.perf_counter() + warmup
    while time.perf_counter() < t_end:
        once()
    n = errors = 0
    t0 = time.perf_counter()
    t_end = t0 + duration
    now = t0
    while now < t_end:
        try:
            status = once()
            if not 200 <= status < 300:
                errors += 1
        except Exception:  # noqa: BLE001 - counted as an error
            errors += 1
        t1 = time.perf_counter()
        rec(int((t1 - now) * 1e6))
        n += 1
        now = t1
    return n, errors, now - t0


def urllib3_origin() -> str:
    """'<distribution> <urllib3.__version__>' of the urllib3 module loaded here, '' if none was imported."""
    mod = sys.modules.get("urllib3")
    if mod is None:
        return ""
    dists = importlib.metadata.packages_distributions().get("urllib3") or ["unknown"]
    # urllib3-future installs the `urllib3` package; only one distribution may own it in a sane environment
    return f"{','.join(sorted(set(dists)))} {getattr(mod, '__version__', '?')}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="client_driver")
    p.add_argument("--client", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--method", default="GET")
    p.add_argument("--body", default=None)
    p.add_argument("--cacert", default=None, help="CA certificate (PEM) that an https URL is verified against")
    p.add_argument("--duration", type=float, default=2.0)
    p.add_argument("--warmup", type=float, default=0.5)
    a = p.parse_args(argv)
    from hdrh.histogram import HdrHistogram
    hist = HdrHistogram(1, 3_600_000_000, 3)

    def rec(us):
        hist.record_value(max(1, us))

    body = a.body.encode() if a.body is not None else None
    try:
        if a.client == "aiohttp":
            n, errors, secs = run_async(a.client, a.url, a.method, body, a.warmup, a.duration, rec, a.cacert)
        else:
            once = make_sync(a.client, a.url, a.method, body, a.cacert)
            if once is None:
                print(f"client_driver: unknown client {a.client!r}", file=sys.stderr)
                return 2
            n, errors, secs = _loop_sync(once, a.warmup, a.duration, rec)
    except ImportError as e:
        print(f"client_driver: {a.client} is not installed: {e}", file=sys.stderr)
        return 3
    except Exception as e:  # noqa: BLE001 - the warm-up failing means the client cannot run at all
        print(f"client_driver: {a.client} failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    try:
        version = importlib.metadata.version(DISTS.get(a.client, a.client))
    except importlib.metadata.PackageNotFoundError:
        version = "repo" if a.client == "requestx_client" else "unknown"
    ru = resource.getrusage(resource.RUSAGE_SELF)
    peak = ru.ru_maxrss * 1024
    try:
        with open("/proc/self/status") as f:
            peak = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        pass
    pct = {"p50": 50, "p90": 90, "p99": 99, "p99_9": 99.9}
    out = {
        "client": a.client, "version": version, "requests": n, "errors": errors, "seconds": secs,
        "rps": n / secs if secs > 0 else 0.0,
        "latency_us": {k: hist.get_value_at_percentile(v) for k, v in pct.items()} | {"max": hist.get_max_value()},
        "peak_rss_bytes": peak, "cpu_seconds": ru.ru_utime + ru.ru_stime, "urllib3": urllib3_origin(),
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
