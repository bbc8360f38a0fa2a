#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test: unit, integration and
# end-to-end (real git, ssh-keygen, nats-server), then each fuzz target briefly.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
(cd "${GATOS_BUILD_DIR:-build}" && ctest --output-on-failure -j 2 --timeout 600)
FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh
echo "test.sh: all tests passed"
