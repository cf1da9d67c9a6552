"""A synthetic HTTP/1.1 server of known capacity: every request costs ``--cost-us`` microseconds of CPU (a busy
loop on one thread), so one process serves at most about 1e6 / cost requests per second. ``--fail-every N``
answers every N-th request with 500 instead (a server that fails some answers while staying fast).
``--stall-at-connection K --stall-ms MS`` stops the whole server for MS once, at the first request of the K-th
connection that sends one (a one-off hiccup, as a GC pause or a noisy neighbour would cause, at a known run:
each run of the load engine opens its own connections).

    python cost_server.py --port PORT --cost-us 1000 [--fail-every 50] [--stall-at-connection 13 --stall-ms 400]

Written by hand: the point is a fixed, known cost per request with nothing else in the way (no framework).
"""

from __future__ import annotations

import argparse
import asyncio
import time

_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
_FAIL = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\nfail"


class CostProtocol(asyncio.Protocol):
    served = 0
    connections_used = 0  # connections that sent a request

    def __init__(self, cost_s: float, fail_every: int, stall_at: int = 0, stall_s: float = 0.0):
        self.cost_s = cost_s
        self.fail_every = fail_every
        self.stall_at = stall_at
        self.stall_s = stall_s
        self.used = False
        self.buf = b""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:  # GET requests without a body: one head is one request
            _, self.buf = self.buf.split(b"\r\n\r\n", 1)
            if not self.used:
                self.used = True
                CostProtocol.connections_used += 1
                if CostProtocol.connections_used == self.stall_at:
                    time.sleep(self.stall_s)  # blocks the event loop: every connection waits
            end = time.perf_counter() + self.cost_s
            while time.perf_counter() < end:
                pass
            CostProtocol.served += 1
            failing = self.fail_every and CostProtocol.served % self.fail_every == 0
            self.transport.write(_FAIL if failing else _OK)
        if len(self.buf) > 65536:
            self.transport.close()


async def serve(port: int, cost_us: float, fail_every: int, stall_at: int, stall_ms: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: CostProtocol(cost_us / 1e6, fail_every, stall_at, stall_ms / 1e3),
                                      "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cost-us", type=float, required=True)
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--stall-at-connection", type=int, default=0)
    p.add_argument("--stall-ms", type=float, default=0.0)
    a = p.parse_args()
    asyncio.run(serve(a.port, a.cost_us, a.fail_every, a.stall_at_connection, a.stall_ms))


if __name__ == "__main__":
    main()
