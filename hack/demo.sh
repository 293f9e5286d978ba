#!/usr/bin/env bash
# The local demo, one command on a fresh machine: sets up what is missing, then starts a
# real kube-apiserver + etcd and a Ray head + worker, runs the operator, and applies the
# examples. `hack/demo.sh --keep` leaves everything running and prints the KUBECONFIG.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh --demo  # no verl oracle of older releases, no old Ray: what the demo runs
exec .venv/bin/python hack/demo.py "$@"
