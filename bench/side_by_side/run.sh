#!/usr/bin/env bash
# Side by side, in one run on this machine: GATOS end to end (build/bin/e2e_bench:
# JOBS signed jobs in one stock git push, nats-server, gatosd, 2 workers with
# their default flags; unsandboxed and sandboxed) against Celery (prefork,
# 2 worker processes, Redis) and RQ (2 workers, Redis), each running the same
# JOBS trivial jobs: `/bin/sh -c 'echo N >> file'` as a subprocess, plus a
# Python no-op task for Celery's best case. Prints jobs/s and the ratios.
#
#   bench/side_by_side/run.sh [JOBS]        (default 2000)
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
BIN=${GATOS_BUILD_DIR:-build}/bin
[ -x "$BIN/e2e_bench" ] || ./scripts/build.sh >&2
HERE=$(pwd)/bench/side_by_side
PY=${GATOS_BENCH_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "machine: $(nproc) CPUs ($cpu), $(free -g | awk '/^Mem:/{print $2}') GiB, Linux $(uname -r), $(. /etc/os-release; echo "$PRETTY_NAME")"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "jobs per system: $JOBS"

echo "== GATOS, unsandboxed (--sandbox off), one git push" >&2
g_off=$("$BIN/e2e_bench" --jobs "$JOBS" --sandbox off --json | tail -1)
echo "== GATOS, default flags (sandboxed), one git push" >&2
g_sb=$("$BIN/e2e_bench" --jobs "$JOBS" --json | tail -1)
echo "== GATOS, unsandboxed (--sandbox off), submit RPC" >&2
g_off_rpc=$("$BIN/e2e_bench" --jobs "$JOBS" --sandbox off --submit rpc --json | tail -1)
echo "== GATOS, default flags (sandboxed), submit RPC" >&2
g_sb_rpc=$("$BIN/e2e_bench" --jobs "$JOBS" --submit rpc --json | tail -1)

port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" > "$work/redis.log" 2>&1 &
pids+=($!)
export GATOS_BENCH_REDIS="redis://127.0.0.1:$port/0"
export PYTHONPATH="$HERE"
for _ in $(seq 1 100); do
  "$PY" -c 'import os, redis; redis.Redis.from_url(os.environ["GATOS_BENCH_REDIS"]).ping()' 2>/dev/null && break
  sleep 0.1
done

echo "== Celery, prefork, 2 worker processes" >&2
(cd "$work" && exec "$PY" -m celery -A celery_tasks worker --pool prefork --concurrency 2 --loglevel WARNING \
  --without-gossip --without-mingle --without-heartbeat > "$work/celery.log" 2>&1) &
celery_pid=$!
pids+=($celery_pid)
"$PY" -c 'import celery_tasks; celery_tasks.noop.delay(0).get(timeout=60)'  # the worker is up
c_shell=$("$PY" "$HERE/peers.py" celery shell "$JOBS" "$work/celery.out" | tail -1)
c_noop=$("$PY" "$HERE/peers.py" celery noop "$JOBS" "$work/celery.out" | tail -1)
kill -TERM "$celery_pid"
wait "$celery_pid" 2>/dev/null || true

echo "== RQ, 2 workers (a fork per job)" >&2
for i in 1 2; do
  (cd "$work" && exec "$PY" -m rq.cli worker --url "$GATOS_BENCH_REDIS" --quiet bench > "$work/rq$i.log" 2>&1) &
  pids+=($!)
done
for _ in $(seq 1 100); do
  n=$("$PY" -c 'import os, redis, rq; print(len(rq.Worker.all(connection=redis.Redis.from_url(os.environ["GATOS_BENCH_REDIS"]))))')
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
r_shell=$("$PY" "$HERE/peers.py" rq "$JOBS" "$work/rq.out" | tail -1)

lines_celery=$(wc -l < "$work/celery.out")
lines_rq=$(wc -l < "$work/rq.out")
"$PY" - "$g_off" "$g_sb" "$g_off_rpc" "$g_sb_rpc" "$c_shell" "$c_noop" "$r_shell" "$lines_celery" "$lines_rq" "$JOBS" <<'EOF'
import json, sys
g_off, g_sb, g_off_rpc, g_sb_rpc, c_shell, c_noop, r_shell = (json.loads(a) for a in sys.argv[1:8])
lines_celery, lines_rq, jobs = int(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10])
rows = [
    ("GATOS, unsandboxed, one git push, sh -c 'echo N >> file'", g_off),
    ("GATOS, sandboxed (default), one git push, sh -c 'echo N >> file'", g_sb),
    ("GATOS, unsandboxed, submit RPC, sh -c 'echo N >> file'", g_off_rpc),
    ("GATOS, sandboxed (default), submit RPC, sh -c 'echo N >> file'", g_sb_rpc),
    ("Celery prefork, subprocess sh -c 'echo N >> file'", c_shell),
    ("Celery prefork, Python no-op", c_noop),
    ("RQ, subprocess sh -c 'echo N >> file'", r_shell),
]
print()
print("| system | jobs | seconds | jobs/s |")
print("|---|---|---|---|")
for name, r in rows:
    print("| %s | %d | %.2f | %.0f |" % (name, r.get("finished", r["jobs"]), r["seconds"], r["jobs_per_s"]))
print()
print("ratios (jobs/s of GATOS / jobs/s of the peer):")
for gname, g in (("unsandboxed, push", g_off), ("sandboxed, push", g_sb), ("unsandboxed, RPC", g_off_rpc),
                 ("sandboxed, RPC", g_sb_rpc)):
    for pname, p in (("Celery subprocess", c_shell), ("Celery no-op", c_noop), ("RQ", r_shell)):
        print("  GATOS %-17s / %-17s %6.2fx" % (gname, pname, g["jobs_per_s"] / p["jobs_per_s"]))
if any(g["finished"] != jobs for g in (g_off, g_sb, g_off_rpc, g_sb_rpc)):
    sys.exit("GATOS did not finish every job")
if lines_celery != jobs or lines_rq != jobs:
    sys.exit("the peers' shell jobs did not all run: %d celery, %d rq lines" % (lines_celery, lines_rq))
EOF
