#!/usr/bin/env bash
# The real-code corpus benchmark of gatos-scan (issue 40): for each corpus
# repository (bench/scan/corpus/repos.tsv), in one run,
#  - the floor: `git cat-file --batch-all-objects --batch > /dev/null` on the
#    scan's own mirror, and gatos-scan's full scan (mirror present, empty
#    state), alternated run by run; MB/s of unique blob bytes each reads,
#    and the ratio (target >= 1.00);
#  - precision per rule by finding and by distinct secret, and the labelled
#    true secrets found (scan_corpus_eval against corpus/labels.jsonl).
# Prints figures; never passes or fails on them.
#
# usage: run_corpus_bench.sh NAME=GITDIR...
#   e.g. run_corpus_bench.sh libgit2=/work/.mirror/libgit2+libgit2/repo \
#          curl=/work/.mirror/curl+curl/repo git=/work/.mirror/git+git/repo
# env: GATOS_SCAN, SCAN_CORPUS_EVAL (binaries; default next to this script,
#      then build/bin), BENCH_RUNS (default 3), BENCH_WORK (scratch; default
#      a temporary directory, removed at exit), SCAN_ARGS (extra gatos-scan
#      arguments), BENCH_SKIP_TIMING=1 (precision only: one scan each).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
find_bin() {  # find_bin VAR NAME
  local v="${!1:-}"
  for c in "$here/$2" "$here/../../build/bin/$2"; do [ -z "$v" ] && [ -x "$c" ] && v="$c"; done
  [ -x "$v" ] || { echo "run_corpus_bench: $2 not found; build it or set $1" >&2; exit 2; }
  printf '%s' "$v"
}
GATOS_SCAN=$(find_bin GATOS_SCAN gatos-scan)
SCAN_CORPUS_EVAL=$(find_bin SCAN_CORPUS_EVAL scan_corpus_eval)
corpus="$here/corpus"
[ -f "$corpus/repos.tsv" ] || corpus="$here/../../bench/scan/corpus"
RUNS="${BENCH_RUNS:-3}"
read -r -a scan_args <<<"${SCAN_ARGS:-}"
[ $# -gt 0 ] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
work="${BENCH_WORK:-}"
if [ -z "$work" ]; then work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$work"

now() { date +%s.%N; }
secs() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$@"; }
mbps() { python3 -c "import sys; print('%.1f' % (float(sys.argv[1]) / 1e6 / float(sys.argv[2])))" "$@"; }
min() { python3 -c "import sys; print(min(float(x) for x in sys.argv[1:]))" "$@"; }

echo "machine: $(nproc) vCPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(. /etc/os-release && echo "$PRETTY_NAME"); $(date -u +%Y-%m-%d)"
echo "gatos-scan: $GATOS_SCAN ${scan_args[*]+${scan_args[*]}}"
for arg in "$@"; do
  name="${arg%%=*}"; src="${arg#*=}"
  refs=$(awk -F'\t' -v n="$name" '$1==n {print $3}' "$corpus/repos.tsv")
  [ -n "$refs" ] || { echo "run_corpus_bench: $name is not in $corpus/repos.tsv" >&2; exit 2; }
  ref_args=(); for r in $refs; do ref_args+=(--ref "$r"); done
  state="$work/$name-state"; out="$work/$name-out"; mkdir -p "$out"
  scan() {
    "$GATOS_SCAN" --repo "$src" "${ref_args[@]}" --state-dir "$state" --output-dir "$out" --json \
      ${scan_args[@]+"${scan_args[@]}"} >"$work/$name-summary.json" 2>"$work/$name-scan.err" || true
  }
  echo "== $name ($src, refs: $refs)"
  t0=$(now); scan; t1=$(now)
  echo "cold (mirror clone + scan): $(secs "$t0" "$t1")s"
  mirror=$(ls -d "$state"/mirrors/*/ | head -1)
  read -r status bytes partial < <(python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))
print(s['status'], s['bytes_scanned']+s['bytes_skipped_binary']+s['bytes_skipped_too_large'], len(s['partial_reasons']))" "$work/$name-summary.json")
  [ "$status" = complete ] || echo "note: scan $status ($partial reasons, e.g. $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['partial_reasons'][0][:160])" "$work/$name-summary.json"))"
  if [ "${BENCH_SKIP_TIMING:-0}" != 1 ]; then
    floor_bytes=$(git -C "$mirror" cat-file --batch-all-objects --batch-check='%(objecttype) %(objectsize)' |
                  awk '$1=="blob"{s+=$2} END{printf "%.0f", s}')
    floor_ts=(); scan_ts=()
    for _ in $(seq "$RUNS"); do
      t0=$(now); git -C "$mirror" cat-file --batch-all-objects --batch >/dev/null; t1=$(now)
      floor_ts+=("$(secs "$t0" "$t1")")
      rm -f "$state"/scan.sqlite "$state"/scan.sqlite-wal "$state"/scan.sqlite-shm
      t0=$(now); scan; t1=$(now)
      scan_ts+=("$(secs "$t0" "$t1")")
    done
    ft=$(min "${floor_ts[@]}"); st=$(min "${scan_ts[@]}")
    fr=$(mbps "$floor_bytes" "$ft"); sr=$(mbps "$bytes" "$st")
    echo "floor  git cat-file --batch-all-objects --batch: ${ft}s for $floor_bytes blob bytes: $fr MB/s (runs: ${floor_ts[*]})"
    echo "gatos-scan, mirror present, $(nproc) threads: ${st}s for $bytes blob bytes: $sr MB/s (runs: ${scan_ts[*]})"
    echo "rate gatos-scan / floor: $(python3 -c "print('%.2f' % ($sr / $fr))")  (target >= 1.00)"
  fi
  "$SCAN_CORPUS_EVAL" --labels "$corpus/labels.jsonl" --corpus "$name" --repo "$mirror" \
    --findings "$out/findings.jsonl" --stubs "$work/$name-unlabelled.jsonl"
  if [ -s "$work/$name-unlabelled.jsonl" ]; then
    echo "unlabelled findings: label lines to complete in $work/$name-unlabelled.jsonl (set BENCH_WORK to keep it)"
  fi
done
