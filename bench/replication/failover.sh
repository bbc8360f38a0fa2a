#!/usr/bin/env bash
# Failover time of a replicated ledger on loopback, with real processes: a
# three-node nats-server cluster (JetStream), three `gatosd serve
# --replicated` replicas (stream and bucket R3, default election settings).
# KILLS times: the leader (as `gatos cluster status` names it) is SIGKILLed,
# and the time until gatosd answers again (a `gatos status` RPC through the
# cluster: the new leader has applied the stream and serves, claims included)
# is measured; the killed replica is restarted and rejoins as a follower
# before the next kill. Prints each time and the distribution.
#
#   bench/replication/failover.sh [KILLS]   (default 10)
#
# Needs a build (build/bin: gatos, gatosd) and nats-server on PATH. Ports are
# free loopback ports; everything it starts is killed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
KILLS=${1:-10}
BIN=$(realpath "${GATOS_BUILD_DIR:-build}/bin")
WORK=$(mktemp -d /tmp/gatos-failover.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for f in "$WORK"/r*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }

export HOME=$WORK GIT_CONFIG_NOSYSTEM=1
CPORTS=() RPORTS=()
for i in 0 1 2; do CPORTS+=("$(free_port)"); RPORTS+=("$(free_port)"); done
URLS=""
for i in 0 1 2; do
  routes=""
  for j in 0 1 2; do [ "$j" != "$i" ] && routes+="${routes:+, }nats-route://127.0.0.1:${RPORTS[$j]}"; done
  cat > "$WORK/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:${CPORTS[$i]}
jetstream { store_dir: "$WORK/n$i.js" }
cluster { name: gatos, listen: 127.0.0.1:${RPORTS[$i]}, routes: [$routes] }
CONF
  nats-server -c "$WORK/n$i.conf" > "$WORK/n$i.log" 2>&1 &
  PIDS+=($!)
  URLS+="${URLS:+,}nats://127.0.0.1:${CPORTS[$i]}"
done

"$BIN/gatosd" init "$WORK/r0.git" > /dev/null
for i in 1 2; do
  "$BIN/gatosd" init "$WORK/r$i.git" --replica-of "$WORK/r0.git" --ledger-key "$WORK/r0.git/gatos/ledger_key" > /dev/null
done
start_replica() {
  "$BIN/gatosd" serve --replicated --replica-name "r$1" --ledger "$WORK/r$1.git" --nats "$URLS" \
    --stream-replicas 3 --nats-wait-s 60 >> "$WORK/r$1.log" 2>&1 &
  echo $! > "$WORK/r$1.pid"
}
for i in 0 1 2; do start_replica "$i"; done
export GATOS_NATS_KEY=$WORK/r0.git/gatos/ledger_key
status_json() { "$BIN/gatos" cluster status --ledger "$WORK/r0.git" --nats "$URLS" --json 2>/dev/null || true; }
leader() { status_json | python3 -c 'import json,sys
d=json.load(sys.stdin) if sys.stdin.readable() else {}
l=sorted((r["term"], r["name"]) for r in d.get("replicas",[]) if r["role"]=="leader")
print(l[-1][1] if l else "")' 2>/dev/null || true; }
replicas() { status_json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["replicas"]))' 2>/dev/null || echo 0; }
three_replicas() { [ "$(replicas)" = 3 ]; }
one_leader() { [ -n "$(leader)" ]; }
serves() { "$BIN/gatos" status --ledger "$URLS" > /dev/null 2>&1; }
wait_for() {  # wait_for SECONDS CMD...: polls CMD every 20 ms
  local until=$(( $(now_ms) + $1 * 1000 )); shift
  until "$@"; do [ "$(now_ms)" -ge "$until" ] && return 1; sleep 0.02; done
}
wait_for 60 serves || { echo "no leader serves; logs in $WORK" >&2; tail -5 "$WORK"/r*.log >&2; exit 1; }
wait_for 30 three_replicas || true

TIMES=()
for k in $(seq 1 "$KILLS"); do
  wait_for 30 one_leader || true
  L=$(leader)
  [ -n "$L" ] || { echo "kill $k: no leader named" >&2; exit 1; }
  i=${L#r}
  t0=$(now_ms)
  kill -9 "$(cat "$WORK/r$i.pid")"
  # The dead leader no longer answers; the first answer is the new one's.
  if ! wait_for 30 serves; then echo "kill $k: no answer within 30 s" >&2; exit 1; fi
  t1=$(now_ms)
  TIMES+=($((t1 - t0)))
  echo "kill $k: leader $L SIGKILLed; gatosd answered again after $((t1 - t0)) ms (new leader $(leader))"
  start_replica "$i"
  wait_for 30 three_replicas || true
done
printf '%s\n' "${TIMES[@]}" | sort -n | python3 -c '
import sys
t=[int(x) for x in sys.stdin]
q=lambda p: t[min(len(t)-1, int(p*len(t)))]
print(f"failover over {len(t)} kills: min {t[0]} ms, p50 {q(0.5)} ms, p90 {q(0.9)} ms, max {t[-1]} ms")'
