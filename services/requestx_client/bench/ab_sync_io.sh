#!/usr/bin/env bash
# Interleaved A/B of the two sync I/O modes (the direct path, and hyper through reqwest on the runtime's
# worker) against the fastest peers, GET of 13 bytes on one session.
#   RX_PY=<python with requestx_client deps> PEER_PY=<python with pycurl, pyreqwest> bench/ab_sync_io.sh [ROUNDS] [N]
# One nginx worker pinned to core 1, every client process pinned to core 0. Each round runs, in order:
# direct mode, worker mode, pyreqwest, pycurl (one thread), then direct and worker mode with 4 threads
# sharing one session (N/4 requests per thread). One JSON line per run on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
N=${2:-20000}
. bench/_nginx_up.sh

run() {  # mode python client threads n
    REQUESTX_CLIENT_SYNC_IO=$1 taskset -c 0 "$2" bench/bench_sync.py --url "$url" --client "$3" \
        --scenario get --threads "$4" --n "$5" || true
}
for r in $(seq "$ROUNDS"); do
    run direct "$RX_PY" requestx_client 1 "$N"
    run worker "$RX_PY" requestx_client 1 "$N"
    run - "$PEER_PY" pyreqwest 1 "$N"
    run - "$PEER_PY" pycurl 1 "$N"
    run direct "$RX_PY" requestx_client 4 $((N / 4))
    run worker "$RX_PY" requestx_client 4 $((N / 4))
done
