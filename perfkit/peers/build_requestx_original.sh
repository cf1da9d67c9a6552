#!/usr/bin/env bash
# Builds the original `requestx` client (PyPI, sdist only: a Rust extension built with maturin; 7 min here
# on 2 cores with other builds running, allow 10-20) into an environment of its own for the bench's opt-in `requestx` client of the requestx_client scenario:
#
#   perfkit/peers/build_requestx_original.sh [PYTHON]
#
# PYTHON must be the interpreter the bench runs with (the bench prints the exact command when it skips the
# client). The result is $PERFMONO_CACHE/envs/requestx_original/site (default ~/.cache/perfmono/...), holding
# requestx, its dependencies and hdrhistogram (the client driver's). Nothing in `tools/bazel test //...` builds
# it; needs cargo on PATH and the package index. Run once; re-run to rebuild.
set -euo pipefail
python="${1:-python3}"
version="1.0.11"
dest="${PERFMONO_CACHE:-$HOME/.cache/perfmono}/envs/requestx_original"
command -v cargo >/dev/null || { echo "build_requestx_original: cargo is needed on PATH (Rust toolchain)" >&2; exit 2; }
mkdir -p "$(dirname "$dest")"
tmp="$(mktemp -d "$dest.building.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "building requestx $version with $python into $dest (~20 min)..."
# the sdist builds in pip's isolated build env (maturin from the index); --no-binary keeps it the original source
"$python" -m pip install --no-input --disable-pip-version-check --no-warn-script-location \
  --no-binary requestx --target "$tmp/site" "requestx==$version" "hdrhistogram==0.10.8"
# the same isolation the bench uses: no site-packages but this folder
PYTHONPATH="$tmp/site" "$python" -S -s -c "import requestx, hdrh.histogram; requestx.Client().close(); print('requestx', requestx.__version__, 'imports')"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "done: $dest/site (the bench's requestx client now runs)"
