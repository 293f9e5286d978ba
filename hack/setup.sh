#!/usr/bin/env bash
# Sets up what the tests and the demo need, skipping whatever is already there:
#   - .venv with the project installed (editable) and its test extras, and the testbed
#     (tests/testbed: test and demo infrastructure, not part of the product);
#   - kube-apiserver, etcd and helm built from Go modules (hack/build-testbed-bins.sh);
#   - a virtual environment with the oldest Ray that Argus is tested against, for the
#     version-range test (hack/build-ray-env.sh);
#   - the pinned verl releases' config trees Argus composes tasks with (hack/fetch-verl.sh;
#     the unit tests compose with them too, so --python-only fetches them as well), and the
#     verl oracle: a virtual environment with the real verl and torch for each release, for
#     the test that holds Argus's restated start-up checks to verl's own
#     (hack/build-verl-oracle.sh; about 6 GB of wheels, one cache for every release).
#
#   hack/setup.sh [--python-only]     --python-only: the .venv and the verl trees (what the unit tests need)
set -euo pipefail
cd "$(dirname "$0")/.."
stage() { printf '\n==> %s\n' "$*" >&2; }
t0=$SECONDS
if [[ ! -x .venv/bin/python ]]; then
  stage "creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.argus-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp || tests/testbed/pyproject.toml -nt $stamp ]]; then
  stage "installing the project and its test extras into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]' -e tests/testbed
  touch "$stamp"
fi
echo "setup: python environment ready in $((SECONDS - t0)) s" >&2
stage "the pinned verl releases (fetched once from the package index, then cached)"
bash hack/fetch-verl.sh >/dev/null
[[ "${1:-}" == --python-only ]] && exit 0
t1=$SECONDS
# The Python environments come from PyPI (network) while the Go builds take the CPU: both at
# once. A failure of either fails the setup.
stage "in the background: an older Ray for the version-range test, and verl itself as the oracle of the start-up checks (built once from PyPI, then cached)"
(
  bash hack/build-ray-env.sh >/dev/null
  for version in $(awk '!/^#/ && NF {print $1}' operator/argus/verl-releases.txt); do
    bash hack/build-verl-oracle.sh "$version" >/dev/null
  done
  echo "setup: older-Ray environment and verl oracles ready in $((SECONDS - t1)) s" >&2
) &
envs=$!
stage "kube-apiserver, kubectl, etcd, helm (built once from Go modules, then cached)"
bash hack/build-testbed-bins.sh >/dev/null
echo "setup: testbed binaries ready in $((SECONDS - t1)) s" >&2
wait "$envs"
