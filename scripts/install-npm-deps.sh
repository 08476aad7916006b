#!/usr/bin/env bash
# Installs the npm packages the tests need: s3rver (tools/s3rver), the real
# S3-compatible server that the S3 object store tests start, and
# kubernetes-models (tools/kube-validate), which checks deploy/kubernetes.
# Idempotent and quick: does nothing for a dir whose node_modules already
# matches its package.json and package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-npm-deps: node and npm are needed (Debian 12: apt-get install nodejs npm)." >&2
  echo "  Without them the S3 object store tests fail; CUBEPLANE_TEST_S3=off skips them on purpose." >&2
  echo "  The Kubernetes manifest tests (kube_*) are not added when CMake finds no node." >&2
  exit 1
fi

# dir and the package whose presence shows the install finished
for entry in tools/s3rver:s3rver tools/kube-validate:kubernetes-models; do
  dir=${entry%%:*}
  main=${entry#*:}
  want=$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -d' ' -f1)
  stamp="$dir/node_modules/.cubeplane-installed"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/node_modules/$main/package.json" ]; then
    continue
  fi
  echo "== npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
done
