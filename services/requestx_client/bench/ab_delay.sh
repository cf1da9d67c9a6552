#!/usr/bin/env bash
# What a client burns while it waits: sequential GETs to a server that answers each request 1 ms after it
# arrives (bench/delay_server.py, pinned to core 1), in interleaved rounds: requestx_client as it comes
# (its direct path polls only while a connection's answers come within the 50 us budget), the same with
# polling off (REQUESTX_CLIENT_SPIN_US=0), and pycurl. Every client process is pinned to core 0.
#   RX_PY=<python with requestx_client deps> PEER_PY=<python with pycurl> bench/ab_delay.sh [ROUNDS] [N] [DELAY_MS]
# One JSON line per run on stdout; compare cpu_us_per_req (process CPU time of the measured loop / requests).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
N=${2:-2000}
DELAY_MS=${3:-1}
RX_PY=${RX_PY:-python3}
PEER_PY=${PEER_PY:-$RX_PY}
PORT=${PORT:-18081}
export PYTHONPATH=.

taskset -c 1 "$RX_PY" bench/delay_server.py --port "$PORT" --delay-ms "$DELAY_MS" >/dev/null &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
url="http://127.0.0.1:$PORT"

run() {  # poll-budget-us python client
    REQUESTX_CLIENT_SPIN_US=$1 taskset -c 0 "$2" bench/bench_sync.py --url "$url" --client "$3" \
        --scenario get --n "$N" --warmup 200 || true
}
# the order rotates from round to round, so no client always runs first (or right after another)
runs=("50 $RX_PY requestx_client" "0 $RX_PY requestx_client" "50 $PEER_PY pycurl")
for r in $(seq "$ROUNDS"); do
    for i in 0 1 2; do
        # shellcheck disable=SC2086  # each entry is three words
        run ${runs[$(( (r + i) % 3 ))]}
    done
done
