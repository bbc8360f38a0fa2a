# shellcheck shell=bash disable=SC2154
# Shared by run.sh and profile_peers.sh: a scratch directory and the
# processes started, cleaned up at exit; starting and stopping the peers
# (Redis without persistence, Celery prefork, RQ). Source it after setting
# PY (the Python with Debian's celery and rq) and HERE (this directory),
# then call peers_init.

# Makes the scratch directory `work` and the list `pids` of processes to
# stop at exit; sets the exit trap that stops them and removes `work`.
peers_init() {
  work=$(mktemp -d)
  pids=()
  trap peers_cleanup EXIT
}
peers_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}

# Starts redis-server on a free loopback port; exports GATOS_BENCH_REDIS and
# PYTHONPATH for the tasks' modules; returns once Redis answers.
start_redis() {
  local port
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" > "$work/redis.log" 2>&1 &
  pids+=($!)
  export GATOS_BENCH_REDIS="redis://127.0.0.1:$port/0"
  export PYTHONPATH="$HERE"
  for _ in $(seq 1 100); do
    "$PY" -c 'import os, redis; redis.Redis.from_url(os.environ["GATOS_BENCH_REDIS"]).ping()' 2>/dev/null && return 0
    sleep 0.1
  done
  echo "redis-server did not answer; see $work/redis.log" >&2
  return 1
}

# Starts a Celery prefork worker with 2 processes; sets celery_pid; returns
# once it has run a task.
start_celery() {
  (cd "$work" && exec "$PY" -m celery -A celery_tasks worker --pool prefork --concurrency 2 --loglevel WARNING \
    --without-gossip --without-mingle --without-heartbeat > "$work/celery.log" 2>&1) &
  celery_pid=$!
  pids+=("$celery_pid")
  "$PY" -c 'import celery_tasks; celery_tasks.noop.delay(0).get(timeout=60)'
}

# Starts 2 RQ workers (a fork per job) named after $1 on an emptied Redis
# (RQ counts finished jobs there); sets rq_pids; returns once both are
# registered.
start_rq() {
  local n
  "$PY" -c 'import os, redis; redis.Redis.from_url(os.environ["GATOS_BENCH_REDIS"]).flushdb()'
  rq_pids=()
  for i in 1 2; do
    (cd "$work" && exec "$PY" -m rq.cli worker --url "$GATOS_BENCH_REDIS" --quiet --name "bench-$1-$i" bench \
      > "$work/rq$i.log" 2>&1) &
    rq_pids+=($!)
    pids+=($!)
  done
  for _ in $(seq 1 100); do
    n=$("$PY" -c 'import os, redis, rq; print(len(rq.Worker.all(connection=redis.Redis.from_url(os.environ["GATOS_BENCH_REDIS"]))))')
    [ "$n" -ge 2 ] && return 0
    sleep 0.1
  done
  echo "the RQ workers did not register; see $work/rq*.log" >&2
  return 1
}

# Stops a worker process and waits for it.
stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
