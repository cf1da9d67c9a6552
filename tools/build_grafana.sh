#!/usr/bin/env bash
# Opt-in: build a real Grafana server from its Go module, for machines with no other way to get one
# (Grafana has no Debian package, and no server package on PyPI or npm).
#
#   tools/build_grafana.sh            # ~9 min on 2 cores, ~8 GB of Go caches, needs Go >= 1.20
#   tools/obs                         # then finds it and starts it next to Prometheus
#   PERFMONO_GRAFANA_BIN=... bazel test //dashboards:grafana_test   # the manual real-Grafana test
#
# Result: ${PERFMONO_GRAFANA_DIR:-$HOME/.cache/perfmono/grafana}/{bin/grafana,conf/,public/}.
# It is the backend only: the HTTP API works (health, datasource and dashboard provisioning from
# files, /api/search, /api/dashboards/uid/..., POST /api/ds/query against Prometheus); the browser
# UI needs a frontend build that cannot be made from the module's files.
#
# Only the Go module proxy is used. The Grafana module is reachable at a few versions only; the
# default is the June 2023 main branch (it reports 9.2.0). Override with GRAFANA_MODULE_VERSION.
set -euo pipefail

version="${GRAFANA_MODULE_VERSION:-v1.9.2-0.20230609164553-81d85ce8028d}"
wire_version="${WIRE_VERSION:-v0.7.0}"
dest="${PERFMONO_GRAFANA_DIR:-$HOME/.cache/perfmono/grafana}"

die() { echo "build_grafana: $*" >&2; exit 1; }
log() { echo "build_grafana: $*" >&2; }

case "${1:-}" in
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) die "unknown argument: $1 (see --help)" ;;
esac

command -v go >/dev/null || die "Go is needed (>= 1.20): install it, then re-run"
if [[ -x "$dest/bin/grafana" ]]; then
    log "already built: $dest/bin/grafana (delete $dest to rebuild)"
    exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/perfmono-grafana-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

log "downloading github.com/grafana/grafana@$version through the module proxy"
# -json prints the module's directory in the (read-only) module cache.
dir="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/grafana/grafana@$version" \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error", "no Dir")))')" \
    || die "cannot download the Grafana module at $version"

log "copying the module out of the read-only module cache"
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"

log "generating the dependency-injection code (wire $wire_version, tags oss)"
go run "github.com/google/wire/cmd/wire@$wire_version" gen -tags oss ./pkg/server >/dev/null 2>"$work/wire.log" \
    || { tail -n 30 "$work/wire.log" >&2; die "wire gen failed"; }

log "building the server (this is the slow part: ~9 min on 2 cores)"
GOFLAGS=-mod=mod go build -o "$work/grafana" ./pkg/cmd/grafana || die "go build failed"

log "installing into $dest"
mkdir -p "$dest.tmp/bin"
cp "$work/grafana" "$dest.tmp/bin/grafana"
cp -r conf "$dest.tmp/conf"
# plugin.json of the core plugins (the Prometheus datasource among them) and the server-side templates
mkdir -p "$dest.tmp/public"
cp -r public/app "$dest.tmp/public/app" 2>/dev/null || true
for d in emails views img; do [[ -d "public/$d" ]] && cp -r "public/$d" "$dest.tmp/public/$d"; done
rm -rf "$dest"
mv "$dest.tmp" "$dest"
"$dest/bin/grafana" -v 2>/dev/null || "$dest/bin/grafana" server -v 2>/dev/null || true
log "done: $dest/bin/grafana (tools/obs picks it up)"
