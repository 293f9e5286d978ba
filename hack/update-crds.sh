#!/usr/bin/env bash
# Regenerates the ArgusTask CRD from the pydantic models (the one source of truth) into
# crds/ and copies it into the Helm chart. tests/unit/test_crd.py fails when these are stale.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
"$PY" -m argus.cli crd > crds/argus.io_argustasks.yaml
mkdir -p charts/argus/crds
cp crds/argus.io_argustasks.yaml charts/argus/crds/argus.io_argustasks.yaml
echo "wrote crds/argus.io_argustasks.yaml and charts/argus/crds/argus.io_argustasks.yaml"
