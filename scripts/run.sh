#!/usr/bin/env bash
# Installs dependencies, builds, and runs the main job.
#
# Today the main job is the foundation: validate and hash the example job
# manifests, make an OpenSSH Ed25519 key, and prove that what gatos signs is
# accepted by stock OpenSSH. (The ledger and worker issues grow this into the
# full local stack: nats-server, gatosd, workers, a job pushed with git.)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
GATOS=./build/bin/gatos
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== manifests"
$GATOS job validate examples/*.yaml examples/*.json
echo "== job id of examples/hello.yaml (ADR-0002 example)"
$GATOS job id examples/hello.yaml
echo "== canonical JSON"
$GATOS job canon examples/hello.yaml; echo
echo "== key pair"
$GATOS keygen -f "$work/worker" -C demo-worker
ssh-keygen -l -f "$work/worker.pub"
echo "== ssh-keygen accepts our private key"
ssh-keygen -y -f "$work/worker" | cut -d' ' -f1-2
echo "run.sh: done"
