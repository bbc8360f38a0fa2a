#!/usr/bin/env bash
# Scan throughput of gatos-scan, in MB/s of unique blob bytes, against
#  - the floor: `git cat-file --batch-all-objects --batch > /dev/null`
#    (reads every object once, single-threaded), and
#  - `git secrets --scan-history` (Debian git-secrets, AWS patterns).
# Prints figures; never passes or fails on time.
#
# usage: run_scan_bench.sh [REPO]
#   REPO: an existing repository to scan. Without it a synthetic repository
#   of ~$BENCH_MB MB (default 300) unique blob bytes is generated once into
#   $BENCH_DIR (default /tmp/gatos-scan-bench).
# env: GATOS_SCAN (binary; default: next to this script, then build/bin),
#      BENCH_RUNS (default 3), GIT_SECRETS_TIMEOUT seconds (default 300),
#      SCAN_ARGS (extra gatos-scan arguments, e.g. to compare rule sets:
#      SCAN_ARGS="--no-default-rules --rules old-rules.yaml").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
GATOS_SCAN="${GATOS_SCAN:-}"
for c in "$here/gatos-scan" "$here/../../build/bin/gatos-scan"; do
  [ -z "$GATOS_SCAN" ] && [ -x "$c" ] && GATOS_SCAN="$c"
done
[ -x "$GATOS_SCAN" ] || { echo "scan_bench: gatos-scan not found; build it or set GATOS_SCAN" >&2; exit 2; }
BENCH_DIR="${BENCH_DIR:-/tmp/gatos-scan-bench}"
BENCH_MB="${BENCH_MB:-300}"
RUNS="${BENCH_RUNS:-3}"
read -r -a scan_args <<<"${SCAN_ARGS:-}"
GS_TIMEOUT="${GIT_SECRETS_TIMEOUT:-300}"
gen="$here/gen_repo.py"
[ -f "$gen" ] || gen="$(cd "$here/../../bench/scan" 2>/dev/null && pwd)/gen_repo.py"

repo="${1:-}"
if [ -z "$repo" ]; then
  repo="$BENCH_DIR/repo-${BENCH_MB}mb.git"
  if [ ! -f "$repo/packed-refs" ] && [ ! -d "$repo/refs/heads/main" ] && ! git -C "$repo" rev-parse -q --verify main >/dev/null 2>&1; then
    echo "scan_bench: generating $repo (~${BENCH_MB} MB of blobs, once)..." >&2
    rm -rf "$repo"; mkdir -p "$repo"
    git init -q --bare "$repo"
    python3 "$gen" "$BENCH_MB" | git -C "$repo" fast-import --quiet
    git -C "$repo" repack -a -d -q
  fi
fi

now() { date +%s.%N; }
rate() { python3 -c "import sys; b,t=float(sys.argv[1]),float(sys.argv[2]); print('%.1f' % (b/1e6/t))" "$@"; }
best_of() {  # best wall time of RUNS runs of "$@"
  local best="" t0 t1 d
  for _ in $(seq "$RUNS"); do
    t0=$(now); "$@" >/dev/null 2>&1 || true; t1=$(now)
    d=$(python3 -c "print(float('$t1')-float('$t0'))")
    if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $d < $best else 1)"; then best=$d; fi
  done
  echo "$best"
}

blob_bytes=$(git -C "$repo" cat-file --batch-all-objects --batch-check='%(objecttype) %(objectsize)' |
             awk '$1=="blob"{s+=$2; n++} END{printf "%.0f %d", s, n}')
read -r bytes nblobs <<<"$blob_bytes"
echo "repo: $repo"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "unique blobs: $nblobs, unique blob bytes: $bytes"

floor_cmd() { git -C "$repo" cat-file --batch-all-objects --batch >/dev/null; }
floor_t=$(best_of floor_cmd)
floor_r=$(rate "$bytes" "$floor_t")
echo "floor  git cat-file --batch-all-objects --batch: ${floor_t}s  ${floor_r} MB/s"
# Reference only: the same read in pack order, which resolves deltas far
# more cheaply than the object-id order above.
unordered_cmd() { git -C "$repo" cat-file --batch-all-objects --unordered --batch >/dev/null; }
unordered_t=$(best_of unordered_cmd)
echo "ref    git cat-file --batch-all-objects --unordered --batch: ${unordered_t}s  $(rate "$bytes" "$unordered_t") MB/s"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out"
# Cold: first scan of the repository, including the libgit2 mirror clone.
t0=$(now)
"$GATOS_SCAN" --repo "$repo" --state-dir "$work/state" --output-dir "$work/out" --json ${scan_args[@]+"${scan_args[@]}"} >"$work/cold.json"
t1=$(now)
cold_t=$(python3 -c "print(float('$t1')-float('$t0'))")
scanned=$(python3 -c "import json; print(json.load(open('$work/cold.json'))['bytes_scanned'])")
echo "rules: $(python3 -c "import json; print(json.load(open('$work/cold.json'))['rules_count'])")"
echo "gatos-scan cold (mirror clone + full scan): ${cold_t}s  $(rate "$bytes" "$cold_t") MB/s  (bytes_scanned=$scanned)"
# Warm mirror, empty done-ledger: the scan itself.
scan_cmd() {
  rm -f "$work/state/scan.sqlite" "$work/state/scan.sqlite-wal" "$work/state/scan.sqlite-shm"
  "$GATOS_SCAN" --repo "$repo" --state-dir "$work/state" --output-dir "$work/out" ${scan_args[@]+"${scan_args[@]}"}
}
scan_t=$(best_of scan_cmd)
scan_r=$(rate "$bytes" "$scan_t")
echo "gatos-scan full scan, mirror present ($(nproc) threads): ${scan_t}s  ${scan_r} MB/s"
one_cmd() {
  rm -f "$work/state/scan.sqlite" "$work/state/scan.sqlite-wal" "$work/state/scan.sqlite-shm"
  "$GATOS_SCAN" --repo "$repo" --state-dir "$work/state" --output-dir "$work/out" --threads 1 ${scan_args[@]+"${scan_args[@]}"}
}
one_t=$(best_of one_cmd)
echo "gatos-scan full scan, 1 thread: ${one_t}s  $(rate "$bytes" "$one_t") MB/s"
inc_cmd() { "$GATOS_SCAN" --repo "$repo" --state-dir "$work/state" --output-dir "$work/out" ${scan_args[@]+"${scan_args[@]}"}; }
inc_t=$(best_of inc_cmd)
echo "gatos-scan rescan, nothing new: ${inc_t}s"
echo "ratio gatos-scan / floor: $(python3 -c "print('%.2f' % ($floor_t/$scan_t))")  (target >= 1.00)"
echo "ratio gatos-scan / pack-order cat-file: $(python3 -c "print('%.2f' % ($unordered_t/$scan_t))")"

# git secrets walks every revision with git grep; bounded by a timeout.
if command -v git-secrets >/dev/null; then
  gs="$work/gs"
  git clone -q --no-checkout "$repo" "$gs"
  git -C "$gs" secrets --register-aws >/dev/null
  t0=$(now)
  set +e
  timeout "$GS_TIMEOUT" git -C "$gs" secrets --scan-history >/dev/null 2>&1
  rc=$?
  set -e
  t1=$(now)
  gs_t=$(python3 -c "print(float('$t1')-float('$t0'))")
  if [ "$rc" = 124 ]; then
    echo "git secrets --scan-history: timed out after ${GS_TIMEOUT}s: < $(rate "$bytes" "$gs_t") MB/s; gatos-scan is > $(python3 -c "print('%.0f' % ($gs_t/$scan_t))")x faster"
  else
    echo "git secrets --scan-history: ${gs_t}s  $(rate "$bytes" "$gs_t") MB/s (exit $rc); gatos-scan / git-secrets: $(python3 -c "print('%.1f' % ($gs_t/$scan_t))")x"
  fi
else
  echo "git secrets: not installed (apt-get install git-secrets)"
fi
