#!/usr/bin/env bash
# Installs every Debian package GATOS needs to build, test and run.
# Idempotent; needs root (or sudo). Set GATOS_SKIP_APT=1 to skip.
# chromium and chromium-driver: the dashboard's browser tests
# (tests/dashboard/browser_test.cpp) drive Debian's headless Chromium over
# WebDriver; nothing is downloaded at test time.
# iproute2: the multi-host test's network namespaces; dpkg-dev, file and
# systemd (systemd-analyze): building and checking the Debian package.
set -euo pipefail
[ "${GATOS_SKIP_APT:-0}" = 1 ] && exit 0

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgit2-dev libsodium-dev libjemalloc-dev libyaml-cpp-dev nlohmann-json3-dev
  libnats-dev nats-server libsqlite3-dev libvectorscan-dev libpcre2-dev
  librust-blake3-dev b3sum bubblewrap openssh-client
  libgtest-dev libgmock-dev googletest
  clang-14 libfuzzer-14-dev libclang-rt-14-dev
  libssl-dev zlib1g-dev python3 python3-jsonschema python3-cryptography git-secrets hyperfine procps jq openssl
  redis-server python3-celery python3-rq python3-redis
  chromium chromium-driver
  iproute2 dpkg-dev file systemd
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
