"""An HTTP/1.1 keep-alive server that answers every request after a fixed delay: the stand-in for a
remote server when measuring what a client burns while it waits (the direct path's polling must not
spin through a 1 ms wait).

    python bench/delay_server.py --port 18081 --delay-ms 1

Answers `hello, world!` (13 bytes) to any request; reads request heads only (the benchmarks send GETs)."""

from __future__ import annotations

import argparse
import asyncio

BODY = b"hello, world!"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)


class Delayed(asyncio.Protocol):
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        loop = asyncio.get_running_loop()
        while b"\r\n\r\n" in self.buf:
            _, _, self.buf = self.buf.partition(b"\r\n\r\n")
            loop.call_later(self.delay, self._answer)

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(ANSWER)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(port: int, delay: float) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Delayed(delay), "127.0.0.1", port)
    print(f"delay_server listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}/", flush=True)
    await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=18081)
    ap.add_argument("--delay-ms", type=float, default=1.0)
    a = ap.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(a.port, a.delay_ms / 1000))


if __name__ == "__main__":
    main()
