#!/usr/bin/env bash
# Installs the lock (requirements/operator.txt, hashes required) and the
# operator's own wheel into a new, empty virtual environment, then starts argus-operator
# --help from it: what the image does, without an image. Prints the environment's folder on
# its last line (kept until removed: tests use it). .ci/run calls it.
#   hack/lock-install.sh [FOLDER]   (default: a new temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
venv="${1:-$(mktemp -d)/venv}"
t0=$SECONDS
"$PYTHON" -m venv "$venv"
# The build backend first, from its lock, and no build isolation after it (it would fetch an
# unpinned backend), as the Dockerfile builds.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary :all: --no-deps \
  -r requirements/build.txt
# --no-compile: pip would byte-compile every module of the lock (Ray's thousands), which the
# prune (hack/prune-venv.sh: every __pycache__) then deletes; the image compiles what is left
# after its prune (Dockerfile). The script took 59 s of CPU, 43 s with this.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --prefer-binary --no-deps \
  --no-build-isolation --no-compile -r requirements/operator.txt
wheels=$(mktemp -d)
# Built from a copy, so that setuptools' build/ and egg-info stay out of the work tree.
src=$(mktemp -d)
cp -r pyproject.toml README.md operator "$src/"
"$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation --wheel-dir "$wheels" "$src"
rm -rf "$src"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$wheels"/argus_operator-*.whl
rm -rf "$wheels"
"$venv/bin/python" -m pip check >&2
"$venv/bin/argus-operator" --help >/dev/null
"$venv/bin/argus-operator" --version >&2
"$venv/bin/python" -c 'import argus.host.operator, argus.servers.webhook.server, ray.job_submission, ray.util.state' >&2
size=$(du -sm "$venv/lib" | cut -f1)
echo "lock-install: $venv: installed and started in $((SECONDS - t0)) s; ${size} MB of packages" >&2
echo "$venv"
