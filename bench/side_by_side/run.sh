#!/usr/bin/env bash
# Side by side, in one run on this machine: GATOS end to end (build/bin/e2e_bench:
# JOBS signed jobs in one stock git push, nats-server, gatosd, 2 workers with
# their default flags; unsandboxed and sandboxed) against Celery (prefork,
# 2 worker processes, Redis) and RQ (2 workers, Redis), each running the same
# JOBS trivial jobs: `/bin/sh -c 'echo N >> file'` as a subprocess, plus a
# Python no-op task for Celery's best case. Prints jobs/s and the ratios.
#
#   bench/side_by_side/run.sh [JOBS [ROUNDS]]   (default 2000 jobs, 3 rounds)
#
# Every system runs once per round, the rounds one after the other, so a
# machine whose speed drifts (a VM's does, by 20 % within an hour here)
# moves all of them alike; the table shows each round and the median, and
# the ratios are of the medians, with the range of each round's own ratio.
#
# GATOS is measured twice per sandbox setting: jobs submitted with one stock
# `git push` (as a user would; this includes the push front door) and
# through the gatosd submit RPC by 32 connections (the plane without it).
# Needs what scripts/install-deps.sh installs (redis-server, python3-celery,
# python3-rq) and a build (scripts/build.sh; run here if build/bin has none).
# Python is Debian's /usr/bin/python3 (GATOS_BENCH_PYTHON to change it): the
# peers come from Debian's packages.
# Redis runs without persistence on a free loopback port; everything it
# starts is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS=${1:-2000}
ROUNDS=${2:-3}
BIN=${GATOS_BUILD_DIR:-build}/bin
[ -x "$BIN/e2e_bench" ] || ./scripts/build.sh >&2
HERE=$(pwd)/bench/side_by_side
PY=${GATOS_BENCH_PYTHON:-/usr/bin/python3}
# shellcheck source=bench/side_by_side/peers_lib.sh disable=SC2154  # work: set by peers_init
. "$HERE/peers_lib.sh"
peers_init

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "machine: $(nproc) CPUs ($cpu), $(free -g | awk '/^Mem:/{print $2}') GiB, Linux $(uname -r), $(. /etc/os-release; echo "$PRETTY_NAME")"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "jobs per system: $JOBS, rounds: $ROUNDS"

start_redis

# Appends one result to $work/results: a JSON line of e2e_bench's or
# peers.py's fields plus "name" and "round".
tag() {
  "$PY" -c 'import json, sys; r = json.loads(sys.argv[3]); r["name"] = sys.argv[1]; r["round"] = int(sys.argv[2]); print(json.dumps(r))' \
    "$@" >> "$work/results"
}
round() {
  local r=$1 lines
  echo "== round $r: GATOS, unsandboxed (--sandbox off), one git push" >&2
  tag g_off "$r" "$("$BIN/e2e_bench" --jobs "$JOBS" --sandbox off --json | tail -1)"
  echo "== round $r: GATOS, default flags (sandboxed), one git push" >&2
  tag g_sb "$r" "$("$BIN/e2e_bench" --jobs "$JOBS" --json | tail -1)"
  echo "== round $r: GATOS, unsandboxed (--sandbox off), submit RPC" >&2
  tag g_off_rpc "$r" "$("$BIN/e2e_bench" --jobs "$JOBS" --sandbox off --submit rpc --json | tail -1)"
  echo "== round $r: GATOS, default flags (sandboxed), submit RPC" >&2
  tag g_sb_rpc "$r" "$("$BIN/e2e_bench" --jobs "$JOBS" --submit rpc --json | tail -1)"

  echo "== round $r: Celery, prefork, 2 worker processes" >&2
  : > "$work/celery.out"
  start_celery
  tag c_shell "$r" "$("$PY" "$HERE/peers.py" celery shell "$JOBS" "$work/celery.out" | tail -1)"
  tag c_noop "$r" "$("$PY" "$HERE/peers.py" celery noop "$JOBS" "$work/celery.out" | tail -1)"
  stop "$celery_pid"
  lines=$(wc -l < "$work/celery.out")
  [ "$lines" -eq "$JOBS" ] || { echo "round $r: Celery's shell jobs wrote $lines lines, not $JOBS" >&2; exit 1; }

  echo "== round $r: RQ, 2 workers (a fork per job)" >&2
  : > "$work/rq.out"
  start_rq "$r"
  tag r_shell "$r" "$("$PY" "$HERE/peers.py" rq "$JOBS" "$work/rq.out" | tail -1)"
  for p in "${rq_pids[@]}"; do stop "$p"; done
  lines=$(wc -l < "$work/rq.out")
  [ "$lines" -eq "$JOBS" ] || { echo "round $r: RQ's shell jobs wrote $lines lines, not $JOBS" >&2; exit 1; }
}

for r in $(seq 1 "$ROUNDS"); do round "$r"; done

"$PY" - "$work/results" "$JOBS" "$ROUNDS" <<'EOF'
import json, statistics, sys
results = [json.loads(l) for l in open(sys.argv[1])]
jobs, rounds = int(sys.argv[2]), int(sys.argv[3])
names = [
    ("g_off", "GATOS, unsandboxed, one git push, sh -c 'echo N >> file'"),
    ("g_sb", "GATOS, sandboxed (default), one git push, sh -c 'echo N >> file'"),
    ("g_off_rpc", "GATOS, unsandboxed, submit RPC, sh -c 'echo N >> file'"),
    ("g_sb_rpc", "GATOS, sandboxed (default), submit RPC, sh -c 'echo N >> file'"),
    ("c_shell", "Celery prefork, subprocess sh -c 'echo N >> file'"),
    ("c_noop", "Celery prefork, Python no-op"),
    ("r_shell", "RQ, subprocess sh -c 'echo N >> file'"),
]
by = {k: {r["round"]: r for r in results if r["name"] == k} for k, _ in names}
rate = lambda k, i: by[k][i]["jobs_per_s"]
median = {k: statistics.median(rate(k, i) for i in range(1, rounds + 1)) for k, _ in names}
print()
print("jobs/s per round, and the median (%d jobs each):" % jobs)
print()
print("| system | " + " | ".join("round %d" % i for i in range(1, rounds + 1)) + " | median |")
print("|---|" + "---|" * (rounds + 1))
for k, name in names:
    print("| %s | %s | %.0f |" % (name, " | ".join("%.0f" % rate(k, i) for i in range(1, rounds + 1)), median[k]))
print()
print("ratios (jobs/s of GATOS / jobs/s of the peer): of the medians (each round's own, lowest to highest):")
for gk, gname in (("g_off", "unsandboxed, push"), ("g_sb", "sandboxed, push"), ("g_off_rpc", "unsandboxed, RPC"),
                  ("g_sb_rpc", "sandboxed, RPC")):
    for pk, pname in (("c_shell", "Celery subprocess"), ("c_noop", "Celery no-op"), ("r_shell", "RQ")):
        per = sorted(rate(gk, i) / rate(pk, i) for i in range(1, rounds + 1))
        print("  GATOS %-17s / %-17s %6.2fx   (%.2fx to %.2fx)" % (gname, pname, median[gk] / median[pk], per[0], per[-1]))
unfinished = [r for r in results if r["name"].startswith("g_") and r["finished"] != jobs]
if unfinished:
    sys.exit("GATOS did not finish every job in %d run(s)" % len(unfinished))
EOF
