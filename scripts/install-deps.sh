#!/usr/bin/env bash
# Installs everything Cubeplane needs to build and test on Debian 12.
# Idempotent: skips apt when every package is already there.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates curl procps
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libboost-system1.81-dev
  libyaml-cpp-dev libsqlite3-dev sqlite3 libpq-dev postgresql libspdlog-dev libfmt-dev prometheus-cpp-dev
  libcurl4-openssl-dev libssl-dev libsodium-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  libjemalloc-dev
  chromium fonts-wqy-microhei
  python3 python3-aiosmtpd
  slurm-wlm munge
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Node.js and npm run the S3-compatible test server (s3rver) and build the web
# UI. Debian's packages only where no node is installed: a NodeSource node
# (which ships its own npm) must not be replaced.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing: nodejs npm"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
