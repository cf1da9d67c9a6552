#!/usr/bin/env bash
# Local Prometheus for the perfmono services, on 127.0.0.1, with dashboards/prometheus (config + recording
# and alerting rules). Point your own Grafana at it to use the dashboards (dashboards/README.md says how).
# Ctrl-C (or SIGTERM) stops it and removes its temporary data.
#
#   tools/obs                              # Prometheus on :9090
#   tools/obs --prometheus-port 19090
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prom_dir="$here/prometheus"
prom_port=9090

usage() {
    sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() { echo "obs: $*" >&2; exit 2; }

port_ok() { [[ "$1" =~ ^[0-9]+$ ]] && (( "$1" >= 1 && "$1" <= 65535 )); }

while (( $# )); do
    case "$1" in
        --prometheus-port) [[ $# -ge 2 ]] || die "--prometheus-port needs a value"; prom_port="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
port_ok "$prom_port" || die "--prometheus-port must be a port number (1-65535), got: $prom_port"

prometheus_bin="${PROMETHEUS:-$(command -v prometheus || true)}"
[[ -n "$prometheus_bin" && -x "$prometheus_bin" ]] || {
    echo "obs: prometheus not found: apt-get install -y --no-install-recommends prometheus (tools/bazel does it)" >&2
    exit 1
}

work="$(mktemp -d "${TMPDIR:-/tmp}/perfmono-obs.XXXXXX")"
pids=()
cleanup() {
    trap - INT TERM EXIT
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
    echo "obs: stopped"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

wait_ready() {  # name url pid log
    local i
    for i in $(seq 1 150); do
        if ! kill -0 "$3" 2>/dev/null; then
            echo "obs: $1 exited during start-up; its log:" >&2; tail -n 20 "$4" >&2; exit 1
        fi
        if curl -fsS --max-time 1 -o /dev/null "$2" 2>/dev/null || python3 - "$2" <<'EOF' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=1).read()
EOF
        then return 0; fi
        sleep 0.2
    done
    echo "obs: $1 did not answer $2 within 30 s; its log:" >&2; tail -n 20 "$4" >&2; exit 1
}

# Prometheus: the repo's config as is (rule paths are relative to it), data in the temp dir.
"$prometheus_bin" --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$work/prometheus" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)
wait_ready prometheus "http://127.0.0.1:$prom_port/-/ready" "${pids[-1]}" "$work/prometheus.log"
echo "Prometheus  http://127.0.0.1:$prom_port/   (targets: /targets, rules: /rules, alerts: /alerts; log $work/prometheus.log)"

echo "Dashboards  dashboards/grafana/dashboards/*.json: import them into a Grafana that reads this Prometheus"
echo "Services scraped on their default ports: aquilia_app :8081, rpc_app :8082, aurora_app :8083,"
echo "perfkit-load with --metrics-addr 127.0.0.1:9464 (prometheus/targets/defaults.yml), and what the bench"
echo "names with --prom-sd-dir $prom_dir/sd. Ctrl-C stops it."
echo "obs: ready"

while true; do
    for pid in "${pids[@]}"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "obs: a server exited; its log:" >&2; tail -n 20 "$work"/*.log >&2; exit 1
        fi
    done
    sleep 1 &
    wait $! || true
done
