#!/usr/bin/env bash
# Regenerates the CRDs (ArgusTask, ArgusCluster) from the pydantic models (the one source of
# truth) into crds/ and copies them into the Helm chart. tests/unit/test_crd.py fails when
# these are stale.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
mkdir -p charts/argus/crds
for pair in ArgusTask:argustasks ArgusCluster:argusclusters; do
  kind="${pair%%:*}" plural="${pair#*:}"
  "$PY" -m argus.cli crd --kind "$kind" > "crds/argus.io_${plural}.yaml"
  cp "crds/argus.io_${plural}.yaml" "charts/argus/crds/argus.io_${plural}.yaml"
  echo "wrote crds/argus.io_${plural}.yaml and charts/argus/crds/argus.io_${plural}.yaml"
done
