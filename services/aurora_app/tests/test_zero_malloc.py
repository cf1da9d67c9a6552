"""The request path calls the C allocator not once after warm-up: an LD_PRELOAD interposer
(malloc_count.c) counts every malloc, calloc, realloc and aligned allocation of the server process, and
the count must not move across 100,000 keep-alive requests of every kind (beside the GC counter test,
which sees only D's own heap)."""
import os
import time

from rawhttp import Reader, get, start_server
from test_zero_gc import MIX

REQUESTS = [raw for raw in MIX if b"/metrics" not in raw]  # a scrape renders text: not the request path


def _count(path: str) -> int:
    time.sleep(0.05)  # the interposer rewrites the file every 10 ms
    with open(path) as f:
        return int(f.read().strip())


def _run(sock, rd, n: int, batch: int = 10) -> None:
    sent = 0
    while sent < n:
        reqs = [REQUESTS[(sent + i) % len(REQUESTS)] for i in range(min(batch, n - sent))]
        sock.sendall(b"".join(reqs))
        for raw in reqs:
            assert rd.read_response(head_only=raw.startswith(b"HEAD")).status in (200, 201, 404, 405)
        sent += len(reqs)


def test_no_malloc_per_request_after_warm_up(aurora_bin, tmp_path):
    """Counted on one keep-alive connection (a new connection may take its buffers from the heap), with
    10 requests in flight at a time. A client that lets more than 64 KiB of answers pile up unsent makes
    the connection's output buffer grow past what it keeps between requests: that growth, and its return
    after the write, go through the allocator by design (the memory cap per connection)."""
    interposer = os.path.abspath(os.environ["MALLOC_COUNT_SO"])
    counts = str(tmp_path / "malloc_calls")
    server = start_server(aurora_bin, "--workers", "1",
                          env={"LD_PRELOAD": interposer, "MALLOC_COUNT_FILE": counts})
    try:
        assert _count(counts) > 0  # the interposer is in place: start-up allocates
        with server.connect(timeout=30) as s:
            rd = Reader(s)
            _run(s, rd, 5_000)  # warm-up: buffers, free lists, the Date cache
            before = _count(counts)
            _run(s, rd, 100_000)
            after = _count(counts)
    finally:
        server.stop()
    assert after == before, f"{after - before} C heap allocations during 100,000 requests"
