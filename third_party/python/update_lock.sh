#!/usr/bin/env bash
# Re-locks third_party/python/requirements_lock.txt from requirements.in with hashes.
# Run by hand after editing requirements.in (needs the package index; takes a few minutes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
venv="${TMPDIR:-/tmp}/perfmono-pip-tools"
[ -x "$venv/bin/pip-compile" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q pip-tools; }
"$venv/bin/pip-compile" -q --generate-hashes --allow-unsafe --strip-extras --no-header --no-emit-find-links \
  -o requirements_lock.txt requirements.in
echo "locked $(grep -c '==' requirements_lock.txt) distributions"
