#!/usr/bin/env bash
# Local observability stack for the perfmono services: Prometheus with dashboards/prometheus (config +
# rules) and, when a Grafana server is installed, Grafana provisioned with dashboards/grafana.
# Both listen on 127.0.0.1 only. Ctrl-C (or SIGTERM) stops both and removes their temporary data.
#
#   tools/obs                                  # Prometheus on :9090, Grafana on :3000 if found
#   tools/obs --prometheus-port 19090 --grafana-port 13000 --no-grafana
#
# Grafana is looked up as $GRAFANA_BIN, then `grafana` / `grafana-server` on PATH, then the build of
# tools/build_grafana.sh (${PERFMONO_GRAFANA_DIR:-$HOME/.cache/perfmono/grafana}/bin/grafana).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prom_dir="$here/prometheus"
graf_dir="$here/grafana"
prom_port=9090
graf_port=3000
want_grafana=1

usage() {
    sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() { echo "obs: $*" >&2; exit 2; }

port_ok() { [[ "$1" =~ ^[0-9]+$ ]] && (( "$1" >= 1 && "$1" <= 65535 )); }

while (( $# )); do
    case "$1" in
        --prometheus-port) [[ $# -ge 2 ]] || die "--prometheus-port needs a value"; prom_port="$2"; shift 2 ;;
        --grafana-port) [[ $# -ge 2 ]] || die "--grafana-port needs a value"; graf_port="$2"; shift 2 ;;
        --no-grafana) want_grafana=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
port_ok "$prom_port" || die "--prometheus-port must be a port number (1-65535), got: $prom_port"
port_ok "$graf_port" || die "--grafana-port must be a port number (1-65535), got: $graf_port"

prometheus_bin="${PROMETHEUS:-$(command -v prometheus || true)}"
[[ -n "$prometheus_bin" && -x "$prometheus_bin" ]] || {
    echo "obs: prometheus not found: apt-get install -y --no-install-recommends prometheus (tools/bazel does it)" >&2
    exit 1
}

grafana_bin=""
if (( want_grafana )); then
    grafana_home="${PERFMONO_GRAFANA_DIR:-$HOME/.cache/perfmono/grafana}"
    for c in "${GRAFANA_BIN:-}" "$(command -v grafana || true)" "$(command -v grafana-server || true)" \
             "$grafana_home/bin/grafana"; do
        if [[ -n "$c" && -x "$c" ]]; then grafana_bin="$c"; break; fi
    done
fi

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

if [[ -n "$grafana_bin" ]]; then
    home="$(cd "$(dirname "$grafana_bin")/.." && pwd)"
    [[ -f "$home/conf/defaults.ini" ]] || home="${GRAFANA_HOME:-/usr/share/grafana}"
    mkdir -p "$work/grafana/data" "$work/grafana/logs" "$work/grafana/plugins"
    sub=()
    [[ "$(basename "$grafana_bin")" == grafana ]] && sub=(server)
    PROMETHEUS_URL="http://127.0.0.1:$prom_port" \
    PERFMONO_DASHBOARDS_DIR="$graf_dir/dashboards" \
    GF_PATHS_PROVISIONING="$graf_dir/provisioning" \
    GF_PATHS_DATA="$work/grafana/data" GF_PATHS_LOGS="$work/grafana/logs" GF_PATHS_PLUGINS="$work/grafana/plugins" \
    GF_SERVER_HTTP_ADDR=127.0.0.1 GF_SERVER_HTTP_PORT="$graf_port" \
    GF_AUTH_ANONYMOUS_ENABLED=true GF_AUTH_ANONYMOUS_ORG_ROLE=Viewer \
    GF_ANALYTICS_REPORTING_ENABLED=false GF_ANALYTICS_CHECK_FOR_UPDATES=false GF_LOG_MODE=console \
        "$grafana_bin" "${sub[@]}" --homepath "$home" >"$work/grafana.log" 2>&1 &
    pids+=($!)
    wait_ready grafana "http://127.0.0.1:$graf_port/api/health" "${pids[-1]}" "$work/grafana.log"
    echo "Grafana     http://127.0.0.1:$graf_port/   (admin/admin; dashboards in folder perfmono; log $work/grafana.log)"
    echo "            API: /api/search?tag=perfmono, /api/dashboards/uid/perfmono-overview"
elif (( want_grafana )); then
    echo "Grafana     not installed: build one with tools/build_grafana.sh (or set GRAFANA_BIN)"
fi
echo "Services scraped on their default ports: aquilia_app :8081, rpc_app :8082, aurora_app :8083,"
echo "perfkit-load with --metrics-addr 127.0.0.1:9464. Ctrl-C stops everything."
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
