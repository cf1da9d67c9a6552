"""Size-limit validation: rpc_app's Limits vs channels-rpc 1.0.1's check_size_limits, same messages.

Messages: a 100 KB request (1,000 small objects in params), a 10,000-element integer array,
and a 100 KB string. rpc_app is measured two ways: as the engine runs it (bounds from the raw
length first, walk only when needed) and with the walk forced (every check on every node).
channels-rpc's figure includes its own pre-parse size check (it UTF-8-encodes the text to
measure it), as its consumer does on every message.

    python bench/bench_limits.py [--reps 2000]
"""

import argparse
import time

import _setup

_setup.django_setup()

import orjson  # noqa: E402
from channels_rpc.config import get_config  # noqa: E402
from channels_rpc.limits import check_size_limits  # noqa: E402

from rpc_app.limits import CHECK_DEPTH, CHECK_LENGTH, CHECK_STRING, Limits  # noqa: E402


def messages():
    objs = [{"id": i, "name": f"item-{i:05d}", "tags": ["a", "b"], "score": i * 0.5, "ok": True}
            for i in range(1000)]
    m100k = {"jsonrpc": "2.0", "method": "store", "params": {"items": objs}, "id": 1}
    while len(orjson.dumps(m100k)) < 100 * 1024:
        objs.append(dict(objs[-1], id=len(objs)))
    arr = {"jsonrpc": "2.0", "method": "sum", "params": [list(range(10_000))], "id": 2}
    s100k = {"jsonrpc": "2.0", "method": "echo", "params": ["x" * (100 * 1024)], "id": 3}
    return {"100 KB objects": m100k, "10,000-int array": arr, "100 KB string": s100k}


def per_call(fn, reps):
    def once():
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return time.perf_counter() - t0
    return _setup.best_of(once, 5) / reps * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args()
    their = get_config().limits
    # the same limits as channels-rpc's defaults
    ours = Limits(max_message_bytes=their.max_message_size, max_array_length=their.max_array_length,
                  max_string_length=their.max_string_length, max_depth=their.max_nesting_depth)
    print(f"limits: ours {ours}")
    print(f"        channels-rpc max_message_size={their.max_message_size} max_array_length={their.max_array_length} "
          f"max_string_length={their.max_string_length} max_nesting_depth={their.max_nesting_depth}")
    all_flags = CHECK_DEPTH | CHECK_LENGTH | CHECK_STRING
    for name, msg in messages().items():
        raw = orjson.dumps(msg)
        text = raw.decode()
        obj = orjson.loads(raw)
        reps = args.reps if "string" in name else max(50, args.reps // 10)

        def ours_engine():
            if ours.message_bytes(text) > ours.max_message_bytes:
                raise AssertionError
            flags, opens = ours.analyze(text)
            if flags:
                ours.check(obj, flags, opens)

        def ours_full():
            ours.check(obj, all_flags)

        def theirs():
            if len(text.encode("utf-8")) > their.max_message_size:
                raise AssertionError
            check_size_limits(obj, 1)

        a = per_call(ours_engine, reps)
        b = per_call(ours_full, reps)
        c = per_call(theirs, reps)
        print(f"{name:18s} ({len(raw):,} B): rpc_app {a:8.2f} µs   rpc_app forced walk {b:8.2f} µs   "
              f"channels-rpc {c:8.2f} µs   ratio {c / a:,.0f}x / {c / b:,.1f}x (forced)", flush=True)


if __name__ == "__main__":
    main()
