"""Engine alone, bytes in -> bytes out: sync and async ``add``, calls/s, µs/call, stage shares.

    python bench/bench_engine.py [--calls 200000]
"""

import argparse
import asyncio
import time

import _setup  # noqa: F401
import orjson

from rpc_app import Engine, Registry, Session
from rpc_app.metrics import Metrics


def build(metrics=None):
    reg = Registry()

    @reg.method()
    def add(a: int, b: int):
        return a + b

    @reg.method()
    async def add_async(a: int, b: int):
        return a + b

    return Engine(reg, metrics=metrics)


async def _noop_send(b):
    return None


def bench_sync(engine, n):
    session = Session(engine, _noop_send)
    data = b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'
    h = engine.handle
    t0 = time.perf_counter()
    for _ in range(n):
        h(data, session)
    return time.perf_counter() - t0


def bench_async(engine, n):
    data = b'{"jsonrpc":"2.0","method":"add_async","params":[1,2],"id":1}'

    async def run():
        session = Session(engine, _noop_send)
        h = engine.handle
        t0 = time.perf_counter()
        for _ in range(n):
            await h(data, session)
        return time.perf_counter() - t0
    return asyncio.run(run())


def stages(engine, n):
    data = b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'
    session = Session(engine, _noop_send)
    parse = engine._parse
    msg = parse(data)

    def t_parse():
        t0 = time.perf_counter()
        for _ in range(n):
            parse(data)
        return time.perf_counter() - t0

    def t_validate():
        v = engine._validate
        t0 = time.perf_counter()
        for _ in range(n):
            v(data, msg)
        return time.perf_counter() - t0

    def t_dispatch():
        d = engine._single
        t0 = time.perf_counter()
        for _ in range(n):
            d(msg, session)
        return time.perf_counter() - t0

    pair = (1, 3)

    def t_encode():
        e = engine._encode
        t0 = time.perf_counter()
        for _ in range(n):
            e(pair)
        return time.perf_counter() - t0

    return {k: _setup.best_of(f, 3) for k, f in
            (("parse", t_parse), ("validate", t_validate), ("dispatch", t_dispatch), ("encode", t_encode))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.calls
    plain = build()
    with_metrics = build(Metrics(sample_every=64))
    configs = (("no metrics", plain), ("metrics, 1/64 sampled", with_metrics))
    best = {label: [float("inf"), float("inf")] for label, _ in configs}
    for _ in range(args.repeat):  # interleaved, so machine noise hits every config alike
        for label, eng in configs:
            best[label][0] = min(best[label][0], bench_sync(eng, n))
            best[label][1] = min(best[label][1], bench_async(eng, n))
    rows = [(label, *best[label]) for label, _ in configs]
    print(f"engine alone, {n} calls per run, best of {args.repeat} (interleaved)")
    for label, s, a in rows:
        print(f"  sync add   [{label}]: {n / s:,.0f} calls/s  {s / n * 1e6:.2f} µs/call")
        print(f"  async add  [{label}]: {n / a:,.0f} calls/s  {a / n * 1e6:.2f} µs/call")
    st = stages(plain, n)
    total = sum(st.values())
    print("  stage shares (sync add, each stage timed alone):")
    for k, v in st.items():
        print(f"    {k:9s} {v / n * 1e6:6.3f} µs  {100 * v / total:5.1f}%")
    print(f"  metrics overhead (sync): {100 * (rows[1][1] / rows[0][1] - 1):+.1f}%")
    assert orjson.loads(plain.handle(b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'))["result"] == 3


if __name__ == "__main__":
    main()
