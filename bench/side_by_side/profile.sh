#!/usr/bin/env bash
# CPU per job by process for the whole plane: runs build/bin/e2e_bench under
# a system-wide `perf record` (sampling every CPU at 999 Hz, no call graphs)
# and prints, per process name, the CPU milliseconds per job.
#
#   bench/side_by_side/profile.sh [E2E_BENCH ARGS...]     (default: --jobs 2000)
#
# Samples are taken on CLOCK_MONOTONIC and only those inside the bench's timed
# window (first submission to last result, printed by e2e_bench --json) are
# counted: the setup (ledger init, keys, signing the jobs, writing their
# branches) is not the plane's cost per job. On a shared machine other
# tenants show up as "(other)". `sh` and `true` are the jobs themselves.
# Needs perf (Debian: linux-perf) and root (or perf_event_paranoid <= 0).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${GATOS_BUILD_DIR:-build}/bin
[ -x "$BIN/e2e_bench" ] || ./scripts/build.sh >&2
[ $# -eq 0 ] && set -- --jobs 2000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
perf record -a -k CLOCK_MONOTONIC -F 999 -o "$work/perf.data" -- "$BIN/e2e_bench" --json "$@" > "$work/bench.out" 2> "$work/bench.err" || {
  cat "$work/bench.err" >&2
  exit 1
}
grep -v '^{' "$work/bench.out"
summary=$(grep '^{' "$work/bench.out" | tail -1)
window=$(python3 -c 'import json,sys; w=json.loads(sys.argv[1])["window_monotonic_s"]; print("%.6f,%.6f" % (w[0], w[1]))' "$summary")
perf report -i "$work/perf.data" --stdio --time "$window" --sort comm -g none -n 2>/dev/null | grep -E '^ +[0-9]' > "$work/by_comm"
python3 - "$summary" "$work/by_comm" <<'EOF'
import json, sys
summary = json.loads(sys.argv[1])
jobs = summary["finished"]
groups = {"sh": "jobs (sh)", "true": "jobs (true)", "gatos-supervise": "gatos-supervise", "gatos-worker": "gatos-worker",
          "gatosd": "gatosd", "git": "git (the push, gatosd's repack)", "nats-server": "nats-server",
          "e2e_bench": "e2e_bench (listening)", "swapper": "(idle)"}
cpu = {}
for line in open(sys.argv[2]):
    parts = line.split()
    samples, comm = int(parts[1]), " ".join(parts[2:])
    name = groups.get(comm, "(other)")
    if comm.startswith("git-") or comm == "git":
        name = groups["git"]
    cpu[name] = cpu.get(name, 0) + samples / 999.0
busy = sum(v for k, v in cpu.items() if k != "(idle)")
print("%d jobs in %.2f s (%.0f jobs/s); CPU per job by process (ms):" % (jobs, summary["seconds"], summary["jobs_per_s"]))
for name, secs in sorted(cpu.items(), key=lambda kv: -kv[1]):
    if name == "(idle)":
        continue
    print("  %-36s %6.2f  (%4.1f%%)" % (name, 1000 * secs / jobs, 100 * secs / busy))
print("  %-36s %6.2f" % ("all busy CPU", 1000 * busy / jobs))
EOF
