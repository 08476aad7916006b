#!/usr/bin/env bash
# From a fresh Debian 12 machine to a running Cubeplane with the demo fleet:
# installs the build dependencies, builds, and starts `cubeplane up`.
# Extra arguments go to `cubeplane up` (e.g. --listen 127.0.0.1:9090).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUBEPLANE_WERROR=ON >/dev/null
ninja -C build/release cubeplane
if [ -f web/package.json ] && command -v npm >/dev/null 2>&1; then
  (cd web && npm ci --no-audit --no-fund && npm run build) || echo "web UI not built; the API works without it"
fi
exec build/release/cubeplane up --config examples/demo-fleet.yaml --data-dir .cubeplane "$@"
