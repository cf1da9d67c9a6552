#!/usr/bin/env bash
# Re-locks requirements_lock.txt (the niquests peer's own environment, @pypi_niquests) from requirements.in,
# with hashes. Resolves wheels only, as the repository rule installs them. Run by hand after editing
# requirements.in (needs the package index; takes a minute).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
venv="${TMPDIR:-/tmp}/perfmono-pip-tools"
[ -x "$venv/bin/pip-compile" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q pip-tools; }
"$venv/bin/pip-compile" -q --generate-hashes --allow-unsafe --strip-extras --no-header --no-emit-find-links --no-emit-options \
  --pip-args "--only-binary=:all:" -o requirements_lock.txt requirements.in
echo "locked $(grep -c '==' requirements_lock.txt) distributions"
