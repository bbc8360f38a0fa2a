#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan) into build-fuzz/ and runs
# each for FUZZ_SECONDS (default 10) from its seed corpus in tests/fuzz/corpus,
# FUZZ_JOBS (default: the number of CPUs) at a time. An input that runs
# longer than 30 s is a failure (a hang), not a wait.
#   fuzz.sh --build-only   builds the targets and runs none (test.sh builds
#                          them this way while the test suite runs)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_ONLY=0
case "${1:-}" in
  --build-only) BUILD_ONLY=1 ;;
  "") ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "fuzz.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
esac
SECONDS_EACH=${FUZZ_SECONDS:-10}
JOBS=${FUZZ_JOBS:-$(nproc)}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGATOS_FUZZ=ON >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target fuzz_all
[ "$BUILD_ONLY" = 1 ] && exit 0

# One target: its seeds copied to a scratch corpus, its log in build-fuzz/.
fuzz_one() {
  local target=$1 work
  work=$(mktemp -d)
  [ -d "tests/fuzz/corpus/${target}" ] && cp -r "tests/fuzz/corpus/${target}"/. "$work"/
  if ./build-fuzz/bin/"$target" -max_total_time="$SECONDS_EACH" -timeout=30 -rss_limit_mb=2048 \
       -max_len=65536 -print_final_stats=0 "$work" > "build-fuzz/${target}.log" 2>&1; then
    echo "fuzz: ${target} ran ${SECONDS_EACH}s: $(grep -E '^Done|#[0-9]+.*DONE' "build-fuzz/${target}.log" | tail -1)"
    rm -rf "$work"
    return 0
  fi
  echo "fuzz: ${target} FAILED; see build-fuzz/${target}.log"
  tail -40 "build-fuzz/${target}.log"
  rm -rf "$work"
  return 1
}

# At most JOBS targets at once; each one's exit status is waited for by its
# pid (a finished job's status is kept until then), so no failure is missed.
status=0
pids=()
for target in $(cat build-fuzz/fuzz_targets.txt); do
  if [ "${#pids[@]}" -ge "$JOBS" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
  fuzz_one "$target" &
  pids+=("$!")
done
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
[ "$status" -eq 0 ] && echo "fuzz: every target ran clean"
exit $status
