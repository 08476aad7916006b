#!/usr/bin/env bash
# Builds and tests the web UI (web/): npm ci (skipped while node_modules
# matches package-lock.json), the production build into web/dist, the vitest
# unit tests, and the end-to-end browser tests (web/e2e/run.mjs) that drive
# Debian's chromium against `cubeplane up` from the release build.
# Env: CUBEPLANE_BIN (default build/release/cubeplane), E2E_ARTIFACTS
# (screenshots; default web/e2e/artifacts).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "test-web: node and npm are needed (scripts/install-deps.sh installs them)." >&2
  exit 1
fi

want=$(cat web/package.json web/package-lock.json | sha256sum | cut -d' ' -f1)
stamp=web/node_modules/.cubeplane-installed
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "== npm ci in web"
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi

echo "== web build"
(cd web && npm run --silent build)
echo "== web unit tests"
(cd web && npm test --silent)
echo "== web end-to-end tests"
export CUBEPLANE_BIN="${CUBEPLANE_BIN:-$root/build/release/cubeplane}"
(cd web && node e2e/run.mjs)
