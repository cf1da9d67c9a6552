"""Medians and per-round ratios of the JSON lines an interleaved A/B script (bench/ab_*.sh) printed.

    bench/ab_tls.sh 5 8000 | tee runs.jsonl; python bench/ab_summary.py runs.jsonl [--base pycurl]

Rounds are matched by order: the k-th run of a client in a scenario is its round k.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--base", default="pycurl", help="the client every ratio divides by")
    ap.add_argument("--metric", default="req_per_s", help="req_per_s, or cpu_us_per_req")
    args = ap.parse_args()
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    with open(args.file) as f:
        for line in f:
            if line.startswith("{"):
                j = json.loads(line)
                client = j["client"] + (f" spin={j['spin_us']}" if j.get("spin_us") == 0 else "")
                if j.get("threads", 1) > 1:
                    client += f" x{j['threads']}"
                runs[(j["scenario"], client)].append(j[args.metric])
    for (scenario, client), values in sorted(runs.items()):
        base = runs.get((scenario, args.base), [])
        ratios = [v / b for v, b in zip(values, base) if b]
        shown = f"median {statistics.median(values):,.1f}  runs {', '.join(f'{v:,.0f}' for v in values)}"
        if ratios and client != args.base:
            shown += (f"  ÷ {args.base} per round {', '.join(f'{r:.2f}' for r in ratios)}"
                      f" (median {statistics.median(ratios):.2f}×)")
        print(f"{scenario:8} {client:24} {shown}")


if __name__ == "__main__":
    main()
