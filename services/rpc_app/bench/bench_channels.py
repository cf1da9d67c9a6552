"""Channels path through WebsocketCommunicator: rpc_app's adapter vs channels-rpc 1.0.1 vs a plain
AsyncJsonWebsocketConsumer doing the same ``add`` (the floor of the Channels path).

Each variant runs ping-pong (send one call, await its answer) for --seconds, reporting calls/s
per --window seconds to show decay over time. Request ids are unique (channels-rpc refuses reuse).

    python bench/bench_channels.py [--seconds 20] [--window 5] [--variants ours,plain,channels_rpc]
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


async def run(cls, seconds: float, window: float):
    c = WebsocketCommunicator(cls.as_asgi(), "/ws/")
    ok, _ = await c.connect()
    assert ok
    prefix = '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":'
    rid = 0
    windows = []
    t_start = time.perf_counter()
    t_win = t_start
    n_win = 0
    send, recv = c.send_to, c.receive_from
    while True:
        rid += 1
        await send(text_data=prefix + str(rid) + "}")
        r = await recv(5)
        if rid == 1:
            assert '"result"' in r and "3" in r, r
        n_win += 1
        if n_win & 63 == 0:
            now = time.perf_counter()
            if now - t_win >= window:
                windows.append(n_win / (now - t_win))
                t_win, n_win = now, 0
                if now - t_start >= seconds:
                    break
    await c.disconnect()
    return windows, rid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--window", type=float, default=5)
    ap.add_argument("--variants", default="plain,ours,channels_rpc,ours_metrics")
    args = ap.parse_args()
    results = {}
    for name in args.variants.split(","):
        windows, total = asyncio.run(run(VARIANTS[name], args.seconds, args.window))
        results[name] = windows
        ws = " ".join(f"{w:,.0f}" for w in windows)
        drift = 100 * (windows[-1] / windows[0] - 1)
        print(f"{name:13s} calls/s per {args.window:g}s window: {ws}   mean {sum(windows) / len(windows):,.0f}"
              f"  last/first {drift:+.1f}%  ({total} calls)", flush=True)
    mean = {k: sum(v) / len(v) for k, v in results.items()}
    if "ours" in mean and "plain" in mean:
        print(f"ours / plain floor: {100 * mean['ours'] / mean['plain']:.1f}%")
    if "ours" in mean and "channels_rpc" in mean:
        print(f"ours / channels-rpc: {mean['ours'] / mean['channels_rpc']:.2f}x")


if __name__ == "__main__":
    main()
