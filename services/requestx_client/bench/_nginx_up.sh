# Sourced by the A/B and run-all scripts: environment defaults, then one nginx worker pinned to core 1
# (stopped on exit) and `url` pointing at it.
RX_PY=${RX_PY:-python3}
PEER_PY=${PEER_PY:-$RX_PY}
PORT=${PORT:-18080}
export PYTHONPATH=.

python3 bench/nginx.py --port "$PORT" --cpu 1 >/dev/null &
NGINX=$!
trap 'kill -TERM $NGINX 2>/dev/null || true; wait $NGINX 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
url="http://127.0.0.1:$PORT"
