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
# With `nats` as second argument, a NATS node is killed instead: the one
# that leads the replicated log's stream (where the leader appends), as
# its log last says; the time is until a `gatos submit` is acknowledged
# again (a replica leads, has the stream and appends through the two nodes
# left). The node is started again (same store) before the next kill.
#
#   bench/replication/failover.sh [KILLS] [leader|nats]   (default 10 leader)
#
# Needs a build (build/bin: gatos, gatosd) and nats-server on PATH. Ports are
# free loopback ports; everything it starts is killed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
KILLS=${1:-10}
WHAT=${2:-leader}
case "$WHAT" in leader|nats) ;; *) echo "usage: $0 [KILLS] [leader|nats]" >&2; exit 2 ;; esac
BIN=$(realpath "${GATOS_BUILD_DIR:-build}/bin")
WORK=$(mktemp -d /tmp/gatos-failover.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for f in "$WORK"/r*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "logs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }

export HOME=$WORK GIT_CONFIG_NOSYSTEM=1
CPORTS=() RPORTS=() MPORTS=()
for i in 0 1 2; do CPORTS+=("$(free_port)"); RPORTS+=("$(free_port)"); MPORTS+=("$(free_port)"); done
URLS=""
for i in 0 1 2; do
  routes=""
  for j in 0 1 2; do [ "$j" != "$i" ] && routes+="${routes:+, }nats-route://127.0.0.1:${RPORTS[$j]}"; done
  cat > "$WORK/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:${CPORTS[$i]}
http: 127.0.0.1:${MPORTS[$i]}
jetstream { store_dir: "$WORK/n$i.js" }
cluster { name: gatos, listen: 127.0.0.1:${RPORTS[$i]}, routes: [$routes] }
CONF
  URLS+="${URLS:+,}nats://127.0.0.1:${CPORTS[$i]}"
done
start_nats() {
  nats-server -c "$WORK/n$1.conf" >> "$WORK/n$1.log" 2>&1 &
  echo $! > "$WORK/n$1.pid"
  PIDS+=($!)
}
for i in 0 1 2; do start_nats "$i"; done

"$BIN/gatosd" init "$WORK/r0.git" > /dev/null
# A submitter, for the acknowledgements measured after a NATS node's kill.
"$BIN/gatos" keygen -f "$WORK/alice" > /dev/null
"$BIN/gatos" policy allow-submitter --ledger "$WORK/r0.git" "$WORK/alice.pub" > /dev/null
printf 'command: ["/bin/true"]\ntimeout: 30\n' > "$WORK/job.yaml"
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
# One try per poll (GATOS_LEADER_WAIT=0): the client's own waiting for a
# leader backs off up to 1 s between tries, which would round the figure
# up to its next try; polling every 20 ms measures the failover itself.
serves() { GATOS_LEADER_WAIT=0 "$BIN/gatos" status --ledger "$URLS" > /dev/null 2>&1; }
# A new job each time (a nonce in the file): an acknowledgement is a new append.
acknowledges() {
  printf 'command: ["/bin/echo", "%s"]\ntimeout: 30\n' "$(now_ms)-$RANDOM" > "$WORK/job.yaml"
  GATOS_LEADER_WAIT=0 "$BIN/gatos" submit "$WORK/job.yaml" --ledger "$URLS" --sign-key "$WORK/alice" --timeout 5 > /dev/null 2>&1
}
# Every stream has a leader, and its leader sees all its replicas current
# (the restarted node caught up): the next kill then leaves a quorum. Only
# a stream's leader knows its replicas' state (/jsz on each node).
settled() {
  local led=0
  for i in 0 1 2; do
    led=$(( led + $(curl -sf "http://127.0.0.1:${MPORTS[$i]}/jsz?accounts=true&streams=true" | python3 -c '
import json, sys
d = json.load(sys.stdin)
streams = [s for a in d.get("account_details", []) for s in a.get("stream_detail", [])]
mine = [s for s in streams if s.get("cluster", {}).get("leader") == sys.argv[1]]
if any(not all(r.get("current") for r in s["cluster"].get("replicas", [])) for s in mine): print(-100)
else: print(len(mine))' "n$i" || echo -100) ))
  done
  [ "$led" -ge 3 ]  # the log, the job stream and the election bucket
}
# The node whose log last says it became the replicated log's stream leader.
log_stream_leader() {
  for i in 0 1 2; do
    grep -h "new stream leader for '\$G > GATOS_WAL_" "$WORK/n$i.log" 2>/dev/null | tail -1 | sed "s/^\[[0-9]*\] //; s/\$/ $i/" || true
  done | sort | tail -1 | awk '{print $NF}'
}
wait_for() {  # wait_for SECONDS CMD...: polls CMD every 20 ms
  local until=$(( $(now_ms) + $1 * 1000 )); shift
  until "$@"; do [ "$(now_ms)" -ge "$until" ] && return 1; sleep 0.02; done
}
wait_for 60 serves || { echo "no leader serves" >&2; tail -5 "$WORK"/r*.log >&2; KEEP_WORK=1; exit 1; }
wait_for 30 three_replicas || true

TIMES=()
for k in $(seq 1 "$KILLS"); do
  if [ "$WHAT" = nats ]; then
    wait_for 60 acknowledges || { echo "kill $k: nothing acknowledged before it" >&2; exit 1; }
    n=$(log_stream_leader || true)
    [ -n "$n" ] || { echo "kill $k: no node named as the log's stream leader" >&2; exit 1; }
    t0=$(now_ms)
    kill -9 "$(cat "$WORK/n$n.pid")"
    if ! wait_for 60 acknowledges; then echo "kill $k: nothing acknowledged within 60 s" >&2; KEEP_WORK=1; exit 1; fi
    t1=$(now_ms)
    TIMES+=($((t1 - t0)))
    echo "kill $k: NATS node n$n (the log's stream leader) SIGKILLed; a submission acknowledged after $((t1 - t0)) ms"
    start_nats "$n"
    wait_for 120 settled || echo "kill $k: the cluster did not settle within 120 s" >&2
    continue
  fi
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
  wait_for 5 one_leader || true  # its status line is written once a second
  echo "kill $k: leader $L SIGKILLed; gatosd answered again after $((t1 - t0)) ms (new leader $(leader))"
  start_replica "$i"
  wait_for 30 three_replicas || true
done
printf '%s\n' "${TIMES[@]}" | sort -n | python3 -c '
import sys
t=[int(x) for x in sys.stdin]
q=lambda p: t[min(len(t)-1, int(p*len(t)))]
print(f"failover over {len(t)} kills ('"$WHAT"'): min {t[0]} ms, p50 {q(0.5)} ms, p90 {q(0.9)} ms, max {t[-1]} ms")'
