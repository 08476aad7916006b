#!/usr/bin/env bash
# Runs the whole test suite the way CI does: installs what is missing, then
#   1. an optimized build with warnings as errors, and every test on it;
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build, and every test on it;
# both against a throwaway PostgreSQL server (scripts/postgres-test-server.sh),
# a throwaway single-host Slurm cluster (scripts/slurm-test-cluster.sh, as root)
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
# Cold builds on two cores are most of CI's time: no debug info here (a third
# of the compile time; a failure is rerun in a developer's own -g build), and
# the third-party headers precompiled (CUBEPLANE_PCH, about 30 % less CPU).
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
  -DCUBEPLANE_PCH=ON -DCUBEPLANE_WERROR=ON >/dev/null
ninja -C build/release -j "$jobs"
# Test servers started below are stopped on exit, whether the tests pass or
# not: each adds its stop command here.
on_exit=()
trap 'for c in "${on_exit[@]}"; do eval "$c" || true; done' EXIT
# The PostgreSQL store tests need a server: a throwaway one for both runs.
# An explicit CUBEPLANE_TEST_POSTGRES_URL (or CUBEPLANE_TEST_POSTGRES=off) is used as is.
if [ -z "${CUBEPLANE_TEST_POSTGRES_URL:-}" ] && [ "${CUBEPLANE_TEST_POSTGRES:-}" != off ]; then
  on_exit+=('scripts/postgres-test-server.sh stop')
  echo "== postgresql test server"
  CUBEPLANE_TEST_POSTGRES_URL=$(scripts/postgres-test-server.sh start)
  export CUBEPLANE_TEST_POSTGRES_URL
  echo "$CUBEPLANE_TEST_POSTGRES_URL"
fi
# The Slurm executor tests need a cluster: a throwaway single-host one, as
# root only (slurmd runs jobs as their users; elsewhere those tests skip).
# An explicit CUBEPLANE_TEST_SLURM (a running cluster's directory, or off) is used as is.
if [ -z "${CUBEPLANE_TEST_SLURM:-}" ] && [ "$(id -u)" -eq 0 ]; then
  on_exit+=('scripts/slurm-test-cluster.sh stop')
  echo "== slurm test cluster"
  slurm_env=$(scripts/slurm-test-cluster.sh env)  # a failed start stops here (set -e)
  eval "$slurm_env"                                # CUBEPLANE_TEST_SLURM, SLURM_CONF
  echo "$CUBEPLANE_TEST_SLURM"
fi

echo "== release tests"
ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 600 "${filter[@]}"
echo "== web UI tests"
scripts/test-web.sh

echo "== sanitizer build (ASan + UBSan, -Werror)"
# -g1 keeps the line numbers that sanitizer reports print, without the rest.
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1" -DCUBEPLANE_PCH=ON -DCUBEPLANE_SANITIZE=ON \
  -DCUBEPLANE_WERROR=ON -DCUBEPLANE_BENCH=OFF >/dev/null
ninja -C build/asan -j "$jobs"
echo "== sanitizer tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The outage tests (OutageTest.*) are mostly minute-long waits for an
# outage to pass, through the same code as the shorter fencing and HA tests
# that do run here; they run in the release build above, not twice.
ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 900 -E '^OutageTest\.' "${filter[@]}"
echo "all tests passed (release and sanitizer builds) in $root"
