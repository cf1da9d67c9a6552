#!/usr/bin/env bash
# Interleaved rounds of sequential GET and POST (~1 KB JSON) over HTTPS (nginx, TLS 1.3, one kept-alive
# connection, every client verifying against the run's CA): requestx_client, pycurl and pyreqwest.
# SCHEME=http runs the same rounds over plain http (same nginx).
#   RX_PY=<python with requestx_client deps and trustme> PEER_PY=<python with pycurl, pyreqwest> bench/ab_tls.sh [ROUNDS] [N]
# Pinning and output as bench/ab_direct.sh (nginx on core 1, each client on core 0, one JSON line per run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
N=${2:-10000}
RX_PY=${RX_PY:-python3}
PEER_PY=${PEER_PY:-$RX_PY}
PORT=${PORT:-18080}
TLS_PORT=${TLS_PORT:-18443}
export PYTHONPATH=.
CA=$(mktemp --suffix .pem)

"$RX_PY" bench/nginx.py --port "$PORT" --tls-port "$TLS_PORT" --ca-out "$CA" --cpu 1 >/dev/null &
NGINX=$!
trap 'kill -TERM $NGINX 2>/dev/null || true; wait $NGINX 2>/dev/null || true; rm -f "$CA"' EXIT
for _ in $(seq 50); do curl -s -o /dev/null --cacert "$CA" "https://127.0.0.1:$TLS_PORT/" && break; sleep 0.1; done
url="https://127.0.0.1:$TLS_PORT"
tls=(--cacert "$CA")
if [ "${SCHEME:-https}" = http ]; then url="http://127.0.0.1:$PORT"; tls=(); fi

run() {  # python client scenario
    taskset -c 0 "$1" bench/bench_sync.py --url "$url" "${tls[@]}" --client "$2" --scenario "$3" --n "$N" || true
}
for r in $(seq "$ROUNDS"); do
    for scenario in get post1k; do
        run "$RX_PY" requestx_client $scenario
        run "$PEER_PY" pycurl $scenario
        run "$PEER_PY" pyreqwest $scenario
    done
done
