"""Async client benchmark: N GET requests with C in flight at once over one client.

    python bench/bench_async.py --client requestx_client --concurrency 64 --n 20000 [--uvloop]

Prints one JSON line: client, concurrency, loop, requests, seconds, req_per_s."""

from __future__ import annotations

import argparse
import asyncio
import json
import time


async def run(client: str, url: str, n: int, conc: int) -> float:
    if client == "requestx_client":
        import requestx_client
        c = requestx_client.AsyncClient(pool_maxsize=conc)

        async def one() -> None:
            (await c.get(url)).content
        close = c.aclose
    elif client == "aiohttp":
        import aiohttp
        c = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc))

        async def one() -> None:
            async with c.get(url) as r:
                await r.read()
        close = c.close
    elif client == "httpx":
        import httpx
        c = httpx.AsyncClient(limits=httpx.Limits(max_connections=conc, max_keepalive_connections=conc))

        async def one() -> None:
            (await c.get(url)).content
        close = c.aclose
    elif client == "requestx":  # the original Rust client (httpx-style API)
        import requestx
        c = requestx.AsyncClient()

        async def one() -> None:
            (await c.get(url)).content
        close = c.aclose
    else:
        raise SystemExit(f"unknown client {client}")

    async def worker(count: int) -> None:
        for _ in range(count):
            await one()

    await asyncio.gather(*(worker(20) for _ in range(conc)))  # warm-up: open the connections
    per = n // conc
    t0 = time.perf_counter()
    await asyncio.gather(*(worker(per) for _ in range(conc)))
    took = time.perf_counter() - t0
    await close()
    return per * conc / took, took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True)
    ap.add_argument("--url", default="http://127.0.0.1:18080/")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--uvloop", action="store_true")
    args = ap.parse_args()
    if args.uvloop:
        import uvloop
        rate, took = uvloop.run(run(args.client, args.url, args.n, args.concurrency))
    else:
        rate, took = asyncio.run(run(args.client, args.url, args.n, args.concurrency))
    print(json.dumps({"client": args.client, "concurrency": args.concurrency,
                      "loop": "uvloop" if args.uvloop else "asyncio", "requests": args.n // args.concurrency * args.concurrency,
                      "seconds": round(took, 3), "req_per_s": round(rate, 1)}))


if __name__ == "__main__":
    main()
