#!/usr/bin/env bash
# Type-check the native core for macOS (x86_64-apple-darwin and aarch64-apple-darwin) on this Linux
# machine: `cargo check` against the vendored crates, offline. Nothing is linked, so no macOS SDK is
# needed; the C parts of dependencies (ring, zstd) are compiled by a stand-in that writes empty objects,
# since no C compiler here targets macOS. What this proves: every libc constant and call, and every
# cfg'd dependency API the crate uses, exists on macOS. Not a build, not a test run.
#   services/requestx_client/tools/check_macos.sh        (after one `tools/bazel build //services/requestx_client:native`)
set -euo pipefail
cd "$(dirname "$0")/../../.."
base=$(tools/bazel info output_base 2>/dev/null)
home="$base/cargo-target/offline-cargo-home"   # written by tools/build_defs/cargo_action.py: the vendored sources
[ -f "$home/config.toml" ] || { echo "check_macos: build //services/requestx_client:native once first" >&2; exit 2; }
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
cat > "$stub/cc" <<'CC'
#!/bin/sh
out=""
while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift;; esac; shift; done
[ -n "$out" ] && : > "$out"
exit 0
CC
cat > "$stub/ar" <<'AR'
#!/bin/sh
for a in "$@"; do case "$a" in *.a) printf '!<arch>\n' > "$a";; esac; done
exit 0
AR
chmod +x "$stub/cc" "$stub/ar"
for target in x86_64-apple-darwin aarch64-apple-darwin; do
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
    env_target=${target//-/_}
    env "CC_$env_target=$stub/cc" "AR_$env_target=$stub/ar" CARGO_HOME="$home" \
        CARGO_TARGET_DIR="$base/cargo-target-macos" PYO3_PYTHON=python3 \
        cargo check --offline --frozen --target "$target" -p requestx-client
    echo "check_macos: $target type-checks"
done
