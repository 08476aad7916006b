#!/usr/bin/env bash
# Runs the whole test suite the way CI does: installs what is missing, then
#   1. an optimized build with warnings as errors, and every test on it;
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build, and every test on it;
# both against a throwaway PostgreSQL server (scripts/postgres-test-server.sh)
# and, for the S3 object store, s3rver (started by the tests themselves).
# Usage: scripts/test.sh [ctest -R regex]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/install-deps.sh
scripts/install-npm-deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
filter=()
[ $# -gt 0 ] && filter=(-R "$1")

echo "== release build (-Werror)"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUBEPLANE_WERROR=ON >/dev/null
ninja -C build/release -j "$jobs"
# The PostgreSQL store tests need a server: a throwaway one for both runs,
# stopped on exit whether the tests pass or not. An explicit
# CUBEPLANE_TEST_POSTGRES_URL (or CUBEPLANE_TEST_POSTGRES=off) is used as is.
if [ -z "${CUBEPLANE_TEST_POSTGRES_URL:-}" ] && [ "${CUBEPLANE_TEST_POSTGRES:-}" != off ]; then
  trap 'scripts/postgres-test-server.sh stop' EXIT
  echo "== postgresql test server"
  CUBEPLANE_TEST_POSTGRES_URL=$(scripts/postgres-test-server.sh start)
  export CUBEPLANE_TEST_POSTGRES_URL
  echo "$CUBEPLANE_TEST_POSTGRES_URL"
fi

echo "== release tests"
ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 600 "${filter[@]}"
echo "== web UI tests"
scripts/test-web.sh

echo "== sanitizer build (ASan + UBSan, -Werror)"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCUBEPLANE_SANITIZE=ON -DCUBEPLANE_WERROR=ON \
  -DCUBEPLANE_BENCH=OFF >/dev/null
ninja -C build/asan -j "$jobs"
echo "== sanitizer tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 900 "${filter[@]}"
echo "all tests passed (release and sanitizer builds) in $root"
