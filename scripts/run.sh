#!/usr/bin/env bash
# Installs dependencies, builds, and runs the main job.
#
# What runs today: the example manifests are validated and hashed, a ledger
# is created with `gatosd init`, a submitter key is generated and allowed by
# the policy, and the ADR-0002 example job is committed, signed and pushed
# with stock git; the job commit is then verified with stock
# `git verify-commit`. (The worker issue grows this into the full local stack:
# nats-server, gatosd serve, workers, results verified.)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
BIN=$(pwd)/build/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com
export GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com

echo "== example manifests"
"$BIN/gatos" job validate examples/*.yaml examples/*.json
id=$("$BIN/gatos" job id examples/hello.yaml)
echo "job id of examples/hello.yaml (ADR-0002 example): $id"

echo "== a ledger and a submitter key"
"$BIN/gatosd" init "$work/ledger.git"
"$BIN/gatos" keygen -f "$work/alice" -C alice
"$BIN/gatos" policy allow-submitter --ledger "$work/ledger.git" "$work/alice.pub"

echo "== push the job with stock git, signed with the submitter's SSH key"
git init -q "$work/jobs"
cp examples/hello.yaml "$work/jobs/job.yaml"
(
  cd "$work/jobs"
  git config gpg.format ssh
  git config user.signingkey "$work/alice"
  git add job.yaml
  git commit -q -S -m "hello job" -m "Job-Id: $id"
  git push "$work/ledger.git" HEAD:refs/gatos/submit/hello
)
git --git-dir "$work/ledger.git" for-each-ref refs/gatos/jobs

echo "== verify the job commit with stock git and OpenSSH"
echo "alice $(cat "$work/alice.pub")" > "$work/allowed_signers"
git --git-dir "$work/ledger.git" -c gpg.format=ssh \
  -c gpg.ssh.allowedSignersFile="$work/allowed_signers" \
  verify-commit "refs/gatos/jobs/${id#blake3:}/job"

echo "== a bad push is refused and changes nothing"
(
  cd "$work/jobs"
  git checkout -q --orphan bad
  printf 'command: ["/bin/true"]\ntimeout: P1Y\n' > job.yaml
  git add job.yaml
  git commit -q -S -m "bad job" -m "Job-Id: $id"
  if git push "$work/ledger.git" HEAD:refs/gatos/submit/bad; then
    echo "run.sh: a bad job was accepted" >&2
    exit 1
  fi
)
echo "run.sh: done"
