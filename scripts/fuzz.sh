#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan) into build-fuzz/ and runs
# each for FUZZ_SECONDS (default 10) from its seed corpus in tests/fuzz/corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-10}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGATOS_FUZZ=ON >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target fuzz_all
status=0
for target in $(cat build-fuzz/fuzz_targets.txt); do
  corpus_src=tests/fuzz/corpus/${target}
  work=$(mktemp -d)
  [ -d "$corpus_src" ] && cp -r "$corpus_src"/. "$work"/
  echo "fuzz: ${target} for ${SECONDS_EACH}s"
  if ! ./build-fuzz/bin/"$target" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 \
       -max_len=65536 -print_final_stats=0 "$work" > "build-fuzz/${target}.log" 2>&1; then
    echo "fuzz: ${target} FAILED; see build-fuzz/${target}.log"; tail -40 "build-fuzz/${target}.log"
    status=1
  else
    grep -E "^Done|#[0-9]+.*DONE" "build-fuzz/${target}.log" | tail -1 || true
  fi
  rm -rf "$work"
done
exit $status
