#!/usr/bin/env bash
# Installs the npm packages the tests need: s3rver (tools/s3rver), the real
# S3-compatible server that the S3 object store tests start.
# Idempotent and quick: does nothing when tools/s3rver/node_modules already
# matches package.json and package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=tools/s3rver
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-npm-deps: node and npm are needed (Debian 12: apt-get install nodejs npm)." >&2
  echo "  Without them the S3 object store tests fail; CUBEPLANE_TEST_S3=off skips them on purpose." >&2
  exit 1
fi

want=$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -d' ' -f1)
stamp="$dir/node_modules/.cubeplane-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/node_modules/s3rver/package.json" ]; then
  exit 0
fi

echo "== npm ci in $dir"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" >"$stamp"
