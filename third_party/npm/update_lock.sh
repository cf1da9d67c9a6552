#!/usr/bin/env bash
# Re-resolve third_party/npm/package-lock.json after editing package.json. The lock keeps each package's
# version and integrity hash but no download address: `npm ci` fetches from the configured registry by name.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rm -rf node_modules package-lock.json
npm install --package-lock-only --omit-lockfile-registry-resolved --ignore-scripts --no-audit --no-fund
