#!/usr/bin/env bash
# Installs dependencies, builds, and runs the main job: the local stack.
#
# `gatos up` starts nats-server (JetStream), a ledger (gatosd init + serve)
# and two workers on loopback. The jobs in examples/ are committed, signed
# with a submitter's SSH key and pushed with stock `git push`; we wait for
# them, check that each ends in the state it should, and verify every result
# with `gatos verify` (when built) and with stock `git verify-commit`. A bad
# push is shown to be refused. A scan job of a repository made here (a git
# input of the job) shows its findings with `gatos findings`. Everything
# stops cleanly at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
BIN=$(cd "${GATOS_BUILD_DIR:-build}" && pwd)/bin
export PATH="$BIN:$PATH"
work=$(mktemp -d)
up_pid=""
cleanup() {
  if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
    kill -INT "$up_pid"
    wait "$up_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
export HOME="$work/home" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com
export GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com

echo "== example manifests"
gatos job validate examples/*.yaml examples/*.json

echo "== gatos up: nats-server, gatosd, 2 workers on loopback"
# Local repositories may be job inputs only under the directories named here.
mkdir -p "$work/repos"
gatos up --dir "$work/stack" --workers 2 --local-inputs "$work/repos" > "$work/up.out" 2> "$work/up.err" &
up_pid=$!
for _ in $(seq 1 300); do
  [ -f "$work/stack/up.json" ] && break
  if ! kill -0 "$up_pid" 2>/dev/null; then cat "$work/up.err" >&2; exit 1; fi
  sleep 0.1
done
[ -f "$work/stack/up.json" ] || { echo "run.sh: gatos up did not become ready" >&2; cat "$work/up.err" >&2; exit 1; }
cat "$work/up.err"
ledger="$work/stack/ledger.git"
nats=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nats_url"])' "$work/stack/up.json")
key="$work/stack/keys/submitter"
# NATS admits only the policy's keys; commands that do not sign use this one.
export GATOS_NATS_KEY="$key"

echo "== push the example jobs with stock git, signed with the submitter's SSH key"
git init -q "$work/jobs"
git -C "$work/jobs" config gpg.format ssh
git -C "$work/jobs" config user.signingkey "$key"
# The commit-msg hook adds each commit's Job-Id trailer (and refuses an invalid job.yaml).
gatos hooks install --repo "$work/jobs" | sed 's/^/  /'
ids=()
for f in examples/hello.yaml examples/fail.yaml examples/sleep.yaml; do
  id=$(gatos job id "$f")
  name=$(basename "$f" .yaml)
  (
    cd "$work/jobs"
    git checkout -q --orphan "$name"
    git rm -q -rf --cached . >/dev/null 2>&1 || true
    cp "$OLDPWD/$f" job.yaml
    git add job.yaml
    git commit -q -S -m "example job $name"
    [ "$(git log -1 --format=%B | sed -n 's/^Job-Id: //p')" = "$id" ] ||
      { echo "run.sh: the commit-msg hook did not add Job-Id: $id" >&2; exit 1; }
    git push "$ledger/push" "HEAD:refs/gatos/submit/$name" 2>&1 | sed -n 's/^remote: /  remote: /p'
  )
  ids+=("$id")
done

echo "== a bad push is refused and changes nothing"
# Workers are claiming and finishing jobs meanwhile (and the ledger retries
# the failing one), so compare what a push could change: every ref but the
# log and the refs the ledger moves for running jobs.
pushable() {
  git --git-dir "$ledger" for-each-ref --format='%(refname) %(objectname)' |
    grep -Ev '^refs/gatos/(log|jobs/[0-9a-f]+/(lease|claims/[0-9a-f]+|result|cancel|retry|attempts/[0-9]+)) ' || true
}
before=$(pushable)
(
  cd "$work/jobs"
  git checkout -q --orphan bad
  printf 'command: ["/bin/true"]\ntimeout: P1Y\n' > job.yaml
  git add job.yaml
  if git commit -q -S -m "bad job" 2> "$work/hook.err"; then
    echo "run.sh: the commit-msg hook let an invalid job.yaml through" >&2
    exit 1
  fi
  sed 's/^/  hook: /' "$work/hook.err"
  # Past the hook (--no-verify), the ledger refuses it just the same.
  git commit -q -S --no-verify -m "bad job" -m "Job-Id: ${ids[0]}"
  if git push "$ledger/push" HEAD:refs/gatos/submit/bad 2> "$work/bad.err"; then
    echo "run.sh: a bad job was accepted" >&2
    exit 1
  fi
  sed -n 's/^remote: /  remote: /p' "$work/bad.err"
)
[ "$before" = "$(pushable)" ] || { echo "run.sh: the refused push changed refs" >&2; exit 1; }

echo "== wait for the jobs"
for id in "${ids[@]}"; do
  gatos wait "$id" --ledger "$nats" --timeout 120 || true
done
state() { gatos status "$1" --ledger "$ledger" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
[ "$(state "${ids[0]}")" = succeeded ] || { echo "run.sh: hello did not succeed" >&2; exit 1; }
[ "$(state "${ids[1]}")" = failed ] || { echo "run.sh: fail.yaml should end failed" >&2; exit 1; }
[ "$(state "${ids[2]}")" = succeeded ] || { echo "run.sh: sleep did not succeed" >&2; exit 1; }
gatos ls --ledger "$nats"
echo "== what hello printed, from its signed result"
[ "$(gatos logs "${ids[0]}" --ledger "$nats")" = "$(gatos logs "${ids[0]}" --ledger "$ledger")" ] ||
  { echo "run.sh: gatos logs differs between gatosd and the ledger directory" >&2; exit 1; }
gatos logs "${ids[0]}" --ledger "$nats" | sed 's/^/  /'

echo "== NATS refuses a client without a key the policy names"
if GATOS_NATS_KEY= gatos ls --ledger "$nats" 2> "$work/anon.err"; then
  echo "run.sh: an anonymous client was served" >&2
  exit 1
fi
sed 's/^/  /' "$work/anon.err"

echo "== a scan job: a repository declared as a git input, scanned in the sandbox"
# A repository whose history holds a (randomly made, fake) AWS access key.
# The scan template declares {{repo}} as a git input: the worker fetches it
# and shows it read-only to gatos-scan, which needs no network; the batch
# pins the repository's current commit (docs/inputs.md).
demo="$work/repos/demo"
git init -q -b main "$demo"
fake=$(python3 -c 'import secrets; a="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"; print("AK" + "IA" + "".join(secrets.choice(a) for _ in range(16)))')
printf 'AWS_ACCESS_KEY_ID=%s\n' "$fake" > "$demo/deploy.env"
git -C "$demo" add deploy.env
git -C "$demo" commit -q -m "add deploy settings"
git -C "$demo" rm -q deploy.env
git -C "$demo" commit -q -m "remove them again"
echo "$demo" > "$work/repos.txt"
batch=$(gatos batch submit --template examples/templates/scan.yaml --repos "$work/repos.txt" --ledger "$ledger" --sign-key "$key")
gatos batch status "$batch" --ledger "$ledger" --wait || { echo "run.sh: the scan job did not succeed" >&2; exit 1; }
scan_job=$(gatos batch status "$batch" --ledger "$ledger" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["job"])')
gatos findings "$scan_job" --repo "$ledger"
gatos findings "$scan_job" --repo "$ledger" --json | python3 -c '
import json, sys
f = json.load(sys.stdin)["findings"]
assert len(f) == 1 and f[0]["rule"] == "aws-access-token" and f[0]["path"] == "deploy.env", f
' || { echo "run.sh: the scan job did not find the planted key" >&2; exit 1; }
echo "  scanned commit (result trailer): $(git --git-dir "$ledger" log -1 --format=%B "refs/gatos/jobs/${scan_job#blake3:}/result" | sed -n 's/^Input-Commit: //p')"
ids+=("$scan_job")

echo "== verify every result offline"
if gatos verify --help >/dev/null 2>&1; then
  gatos verify --repo "$ledger" --all
fi
git --git-dir "$ledger" show refs/gatos/policy:workers > "$work/workers.allowed"
for id in "${ids[@]}"; do
  git --git-dir "$ledger" -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$work/workers.allowed" \
    verify-commit "refs/gatos/jobs/${id#blake3:}/result" 2>&1 | sed 's/^/  /'
done
echo "  result of sleep.yaml, outputs/done.txt: $(git --git-dir "$ledger" show "refs/gatos/jobs/${ids[2]#blake3:}/result:outputs/done.txt")"

echo "== stop the stack"
kill -INT "$up_pid"
wait "$up_pid"
up_pid=""
echo "run.sh: done"
