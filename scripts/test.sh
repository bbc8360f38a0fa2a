#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test: unit, integration and
# end-to-end (real git, ssh-keygen, nats-server), then each fuzz target briefly.
#
# The fuzz targets' build (a second, sanitized build of the libraries) runs
# while the test suite runs, at the lowest CPU and I/O priority: most tests
# wait on processes, git and fsync, and the build takes only the CPU they
# leave idle. Its log is build-fuzz/build.log; a failed fuzz build fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh

mkdir -p build-fuzz
fuzz_log=build-fuzz/build.log
setsid nice -n 19 ionice -c 3 ./scripts/fuzz.sh --build-only > "$fuzz_log" 2>&1 &
fuzz_build=$!
stop_fuzz_build() { kill -- "-$fuzz_build" 2>/dev/null || true; }
trap stop_fuzz_build EXIT

tests=0
(cd "${GATOS_BUILD_DIR:-build}" && ctest --output-on-failure -j 2 --timeout 600) || tests=$?

built=0
wait "$fuzz_build" || built=$?
trap - EXIT
if [ "$built" -ne 0 ]; then
  echo "test.sh: the fuzz targets did not build:" >&2
  tail -40 "$fuzz_log" >&2
  exit 1
fi
[ "$tests" -eq 0 ] || { echo "test.sh: tests failed" >&2; exit "$tests"; }
FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh
echo "test.sh: all tests passed"
