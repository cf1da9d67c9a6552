"""Memory over many requests on one session: RSS printed every `--every` requests.

    python bench/bench_memory.py --n 1000000 --every 100000
"""

from __future__ import annotations

import argparse
import json
import time

import requestx_client


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:18080/")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=100_000)
    args = ap.parse_args()
    s = requestx_client.Session()
    t0 = time.perf_counter()
    print(json.dumps({"requests": 0, "rss_mib": round(rss_mib(), 1)}), flush=True)
    for i in range(1, args.n + 1):
        s.get(args.url).content
        if i % args.every == 0:
            print(json.dumps({"requests": i, "rss_mib": round(rss_mib(), 1),
                              "seconds": round(time.perf_counter() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
