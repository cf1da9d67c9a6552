#!/usr/bin/env bash
# Run every benchmark scenario against one nginx worker pinned to core 1, clients pinned to core 0.
#   RX_PY=<python with requestx_client deps, requests, httpx, aiohttp, uvloop>  \
#   PEER_PY=<python with pycurl, pyreqwest, requestx, urllib3>  bench/run_all.sh [N]
# Each client runs in its own process; clients that swap libraries (niquests) need their own venv
# (NIQUESTS_PY). Results: one JSON line per run on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
. bench/_nginx_up.sh

sync_run() {  # python client scenario threads n
    taskset -c 0 "$1" bench/bench_sync.py --url "$url" --client "$2" --scenario "$3" --threads "$4" --n "$5" || true
}
for scenario in get post1k post10k; do
    for c in requestx_client requests httpx; do sync_run "$RX_PY" $c $scenario 1 "$N"; done
    for c in urllib3 pycurl pyreqwest requestx; do sync_run "$PEER_PY" $c $scenario 1 "$N"; done
    if [ -n "${NIQUESTS_PY:-}" ]; then sync_run "$NIQUESTS_PY" niquests $scenario 1 "$N"; fi
done
sync_run "$RX_PY" requestx_client get 4 $((N / 4))
for c in requestx_client requests httpx; do sync_run "$RX_PY" $c json1m 1 $((N / 100)); done
for c in urllib3 pycurl pyreqwest requestx; do sync_run "$PEER_PY" $c json1m 1 $((N / 100)); done
for c in requestx_client aiohttp httpx; do
    taskset -c 0 "$RX_PY" bench/bench_async.py --url "$url/" --client $c --concurrency 64 --n "$N" || true
    taskset -c 0 "$RX_PY" bench/bench_async.py --url "$url/" --client $c --concurrency 64 --n "$N" --uvloop || true
done
taskset -c 0 "$PEER_PY" bench/bench_async.py --url "$url/" --client requestx --concurrency 64 --n "$N" || true
