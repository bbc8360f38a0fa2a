#!/usr/bin/env bash
# CPU per job by process for a peer of the side-by-side benchmark, measured
# as bench/side_by_side/profile.sh measures GATOS: a system-wide `perf
# record` (every CPU at 999 Hz, no call graphs) around JOBS jobs, counting
# only the samples inside the client's timed window (first submission to
# last result).
#
#   bench/side_by_side/profile_peers.sh [celery-shell|celery-noop|rq] [JOBS]
#                                       (default: celery-shell 2000)
#
# celery-shell: Celery prefork, 2 worker processes, each task runs
# `/bin/sh -c 'echo N >> file'` as a subprocess; celery-noop: a Python no-op
# task; rq: RQ, 2 workers, a fork per job running the same `sh`. Redis
# without persistence on a free loopback port. The client (peers.py:
# submits every job, then collects every result) is counted apart from the
# workers. Needs perf (linux-perf), root, and what run.sh needs.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { echo "usage: bench/side_by_side/profile_peers.sh [celery-shell|celery-noop|rq] [JOBS]   (default: celery-shell 2000)"; }
what=${1:-celery-shell}
JOBS=${2:-2000}
case "$what" in
  celery-shell | celery-noop | rq) ;;
  -h | --help) usage; exit 0 ;;
  *) echo "profile_peers.sh: unknown peer '$what'" >&2; usage >&2; exit 2 ;;
esac
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "profile_peers.sh: JOBS must be a positive number, not '$JOBS'" >&2; exit 2; }
HERE=$(pwd)/bench/side_by_side
PY=${GATOS_BENCH_PYTHON:-/usr/bin/python3}
# shellcheck source=bench/side_by_side/peers_lib.sh disable=SC2154  # work: set by peers_init
. "$HERE/peers_lib.sh"
peers_init
start_redis
: > "$work/jobs.out"
case "$what" in
  celery-*) start_celery; client=(celery "${what#celery-}" "$JOBS" "$work/jobs.out") ;;
  rq) start_rq profile; client=(rq "$JOBS" "$work/jobs.out") ;;
esac
# The client writes its pid first, so its samples can be told from the
# workers' (all of them are python3).
# shellcheck disable=SC2016  # $$ and $1 are the inner shell's
perf record -a -k CLOCK_MONOTONIC -F 999 -o "$work/perf.data" -- \
  sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$work/client.pid" "$PY" "$HERE/peers.py" "${client[@]}" \
  > "$work/client.out" 2> "$work/perf.err" || { cat "$work/perf.err" >&2; exit 1; }
summary=$(grep '^{' "$work/client.out" | tail -1)
if [ "$what" != celery-noop ]; then
  lines=$(wc -l < "$work/jobs.out")
  [ "$lines" -eq "$JOBS" ] || { echo "profile_peers.sh: the jobs wrote $lines lines, not $JOBS" >&2; exit 1; }
fi
window=$("$PY" -c 'import json,sys; w=json.loads(sys.argv[1])["window_monotonic_s"]; print("%.6f,%.6f" % (w[0], w[1]))' "$summary")
perf report -i "$work/perf.data" --stdio --time "$window" --sort pid -g none -n 2>/dev/null | grep -E '^ +[0-9]' > "$work/by_pid"
"$PY" - "$what" "$summary" "$work/by_pid" "$(cat "$work/client.pid")" <<'PYEOF'
import json, sys
what, summary, by_pid, client = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
jobs = summary["jobs"]
workers = "RQ workers and their work horses (python3)" if what == "rq" else "Celery workers (python3)"
cpu = {}
for line in open(by_pid):
    parts = line.split()
    samples, pid_comm = int(parts[1]), " ".join(parts[2:])
    pid, _, comm = pid_comm.partition(":")
    if pid == client:
        name = "the client (peers.py: submit, collect)"
    elif comm == "sh":
        name = "jobs (sh)"
    elif comm == "redis-server":
        name = "redis-server"
    elif comm == "swapper":
        name = "(idle)"
    elif comm.startswith(("python", "celery", "rq")):
        name = workers
    else:
        name = "(other)"
    cpu[name] = cpu.get(name, 0) + samples / 999.0
busy = sum(v for k, v in cpu.items() if k != "(idle)")
print("%s: %d jobs in %.2f s (%.0f jobs/s); CPU per job by process (ms):" % (what, jobs, summary["seconds"],
                                                                             summary["jobs_per_s"]))
for name, secs in sorted(cpu.items(), key=lambda kv: -kv[1]):
    if name != "(idle)":
        print("  %-44s %6.2f  (%4.1f%%)" % (name, 1000 * secs / jobs, 100 * secs / busy))
print("  %-44s %6.2f" % ("all busy CPU", 1000 * busy / jobs))
PYEOF
