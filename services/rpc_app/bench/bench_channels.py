"""Channels path through WebsocketCommunicator: rpc_app's adapter vs channels-rpc 1.0.1 vs a plain
AsyncJsonWebsocketConsumer doing the same ``add`` (the floor of the Channels path).

Ping-pong (send one call, await its answer), request ids unique (channels-rpc refuses reuse).
Two parts: interleaved rounds (every variant runs --window seconds per round, so the noise of a
shared machine hits all alike; ratios are medians of per-round ratios), then optionally each of
--sustain-variants alone for --sustain seconds, reporting calls/s per --sustain-window (decay).

    python bench/bench_channels.py [--rounds 5] [--window 2] [--sustain 60]
"""

import argparse
import asyncio
import time

import _setup

_setup.django_setup()

from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402
from channels.testing import WebsocketCommunicator  # noqa: E402
from channels_rpc import AsyncJsonRpcWebsocketConsumer  # noqa: E402

from rpc_app.django_channels import AsyncJsonRpcConsumer, rpc_method  # noqa: E402


class Ours(AsyncJsonRpcConsumer):
    rpc_metrics = None

    @rpc_method()
    def add(self, a: int, b: int):
        return a + b


class OursDbHop(AsyncJsonRpcConsumer):
    """Same, keeping Channels' per-message close_old_connections thread hop (as if a DB were configured)."""
    rpc_metrics = None
    rpc_close_old_db_connections = True

    @rpc_method()
    def add(self, a: int, b: int):
        return a + b


class OursWithMetrics(AsyncJsonRpcConsumer):
    @rpc_method()
    def add(self, a: int, b: int):
        return a + b


class TheirRpc(AsyncJsonRpcWebsocketConsumer):
    pass


@TheirRpc.rpc_method("add")
def _their_add(a, b):
    return a + b


class Plain(AsyncJsonWebsocketConsumer):
    async def receive_json(self, content, **kwargs):
        if content.get("method") == "add":
            a, b = content["params"]
            await self.send_json({"jsonrpc": "2.0", "result": a + b, "id": content["id"]})


VARIANTS = {"ours": Ours, "ours_dbhop": OursDbHop, "ours_metrics": OursWithMetrics, "plain": Plain, "channels_rpc": TheirRpc}


class Client:
    """One WebsocketCommunicator doing ping-pong ``add`` calls with unique ids."""

    prefix = '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":'

    def __init__(self, cls):
        self.comm = WebsocketCommunicator(cls.as_asgi(), "/ws/")
        self.rid = 0

    async def open(self):
        ok, _ = await self.comm.connect()
        assert ok

    async def run_for(self, seconds: float) -> float:
        """Calls/s over ``seconds`` of ping-pong."""
        send, recv = self.comm.send_to, self.comm.receive_from
        n = 0
        t0 = time.perf_counter()
        while True:
            self.rid += 1
            await send(text_data=self.prefix + str(self.rid) + "}")
            r = await recv(5)
            if self.rid == 1:
                assert '"result"' in r and "3" in r, r
            n += 1
            if n & 31 == 0:
                now = time.perf_counter()
                if now - t0 >= seconds:
                    return n / (now - t0)

    async def close(self):
        await self.comm.disconnect()


async def interleaved(names, rounds: int, window: float):
    """Round-robin: each variant runs ``window`` s per round, so machine noise hits all alike."""
    clients = {n: Client(VARIANTS[n]) for n in names}
    for c in clients.values():
        await c.open()
    rates = {n: [] for n in names}
    for _ in range(rounds):
        for n, c in clients.items():
            rates[n].append(await c.run_for(window))
    for c in clients.values():
        await c.close()
    return rates


async def sustained(name, seconds: float, window: float):
    c = Client(VARIANTS[name])
    await c.open()
    rates = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        rates.append(await c.run_for(window))
    await c.close()
    return rates, c.rid


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="plain,ours,ours_dbhop,channels_rpc")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (ratios)")
    ap.add_argument("--window", type=float, default=2.0)
    ap.add_argument("--sustain", type=float, default=0, help="then run each of --sustain-variants alone this long")
    ap.add_argument("--sustain-variants", default="ours,channels_rpc")
    ap.add_argument("--sustain-window", type=float, default=5.0)
    args = ap.parse_args()
    names = args.variants.split(",")
    if args.rounds:
        rates = asyncio.run(interleaved(names, args.rounds, args.window))
        print(f"interleaved: {args.rounds} rounds x {args.window:g}s per variant, calls/s per round")
        for n in names:
            print(f"  {n:13s} " + " ".join(f"{r:7,.0f}" for r in rates[n]) + f"   median {median(rates[n]):,.0f}")
        for a, b in (("ours", "plain"), ("ours_dbhop", "plain"), ("ours", "channels_rpc"),
                     ("ours_dbhop", "channels_rpc")):
            if a in rates and b in rates:
                per_round = [x / y for x, y in zip(rates[a], rates[b])]
                print(f"  {a} / {b}: median of per-round ratios {median(per_round):.2f}x")
    if args.sustain:
        for n in args.sustain_variants.split(","):
            rates, total = asyncio.run(sustained(n, args.sustain, args.sustain_window))
            first, last = rates[0], rates[-1]
            print(f"sustained {n:13s} {args.sustain:g}s, calls/s per {args.sustain_window:g}s: "
                  + " ".join(f"{r:,.0f}" for r in rates)
                  + f"   last/first {100 * (last / first - 1):+.1f}%  ({total} calls)", flush=True)


if __name__ == "__main__":
    main()
