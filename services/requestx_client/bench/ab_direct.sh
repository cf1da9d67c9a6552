#!/usr/bin/env bash
# Interleaved rounds of the sequential-GET scenario (13 bytes, one reused session): requestx_client in
# its default sync I/O mode (direct, polling up to 50 us for the answer before sleeping), the same with
# polling off (REQUESTX_CLIENT_SPIN_US=0), pycurl and pyreqwest; then the default with 4 threads sharing
# one session (N/4 requests per thread).
#   RX_PY=<python with requestx_client deps> PEER_PY=<python with pycurl, pyreqwest> bench/ab_direct.sh [ROUNDS] [N]
# The extension is imported from requestx_client/ (after a Bazel build:
# cp bazel-bin/services/requestx_client/requestx_client/_native.abi3.so services/requestx_client/requestx_client/).
# One nginx worker pinned to core 1, every client process pinned to core 0. One JSON line per run on
# stdout, each with req_per_s and cpu_us_per_req (process CPU time of the measured loop / requests).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
N=${2:-20000}
. bench/_nginx_up.sh

run() {  # poll-budget-us python client [threads]
    local threads=${4:-1}
    REQUESTX_CLIENT_SPIN_US=$1 taskset -c 0 "$2" bench/bench_sync.py --url "$url" --client "$3" \
        --scenario get --threads "$threads" --n $((N / threads)) || true
}
for r in $(seq "$ROUNDS"); do
    run 50 "$RX_PY" requestx_client
    run 0 "$RX_PY" requestx_client
    run 50 "$PEER_PY" pycurl
    run 50 "$PEER_PY" pyreqwest
    run 50 "$RX_PY" requestx_client 4
done
