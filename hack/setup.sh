#!/usr/bin/env bash
# Sets up what the tests and the demo need, skipping whatever is already there (everything
# heavy is cached outside the repo, keyed by version, and shared by every clone):
#   - .venv with the project installed (editable) and its test extras, and the testbed
#     (tests/testbed: test and demo infrastructure, not part of the product);
#   - the pinned verl releases' config trees Argus composes tasks with (hack/fetch-verl.sh;
#     the unit tests compose with them too);
#   - kube-apiserver, etcd, kubectl and helm built from Go modules (hack/build-testbed-bins.sh);
#   - the real verl runtime: a virtual environment with verl and torch for each release
#     (hack/build-verl-oracle.sh; about 6 GB of wheels, one cache for every release). The
#     newest release's trains for real in the tests and the demo; every release's is the
#     oracle that holds Argus's restated start-up checks to verl's own;
#   - a virtual environment with the oldest Ray that Argus is tested against, for the
#     version-range test (hack/build-ray-env.sh).
# The Python environments come from PyPI (network) while the Go builds take the CPU: both run
# at once, and a failure of either fails the setup.
#
#   hack/setup.sh                 everything (the whole suite, CI)
#   hack/setup.sh --python-only   the .venv and the verl trees (hack/test.sh -m unit)
#   hack/setup.sh --no-slow       and the testbed binaries (hack/test.sh -m "not slow")
#   hack/setup.sh --demo          and the binaries and the newest verl runtime (hack/demo.sh)
#
# Each step's time goes to build/setup-times.txt (step<TAB>seconds), for the test report.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case $mode in
  all | --python-only | --no-slow | --demo) ;;
  *) echo "usage: hack/setup.sh [--python-only | --no-slow | --demo]" >&2; exit 2 ;;
esac
stage() { printf '\n==> %s\n' "$*" >&2; }
mkdir -p build
times=build/setup-times.txt
: > "$times"
took() { printf '%s\t%s\n' "$1" "$(($SECONDS - $2))" >> "$times"; echo "setup: $1 ready in $(($SECONDS - $2)) s" >&2; }

CACHE="${ARGUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/argus}"

t_all=$SECONDS
t0=$SECONDS
if [[ ! -x .venv/bin/python ]]; then
  stage "creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.argus-installed
venv_stale=false
[[ ! -f $stamp || pyproject.toml -nt $stamp || tests/testbed/pyproject.toml -nt $stamp ]] && venv_stale=true
if $venv_stale; then
  # uv first, alone (seconds): the .venv's own install below and the verl runtimes' and the
  # old Ray's environments (hack/install-into.sh, which falls back to a far slower pip
  # without it) all install with it.
  .venv/bin/python -m pip install -q --disable-pip-version-check uv
fi

# The heavy steps start next, in the background, side by side: the Go builds take the CPU
# while the Python environments come from PyPI (network), and the .venv below installs
# meanwhile. Each is cached and returns at once when done before; a failure of any fails
# the setup.
pids=()
if [[ $mode != --python-only ]]; then
  if [[ $mode != --no-slow ]]; then
    if [[ $mode == --demo ]]; then
      versions=$(awk '!/^#/ && NF {print $1; exit}' operator/argus/verl-releases.txt)
    else
      versions=$(awk '!/^#/ && NF {print $1}' operator/argus/verl-releases.txt)
    fi
    stage "in the background: the real verl runtime(s) $versions$([[ $mode == all ]] && echo ' and an older Ray for the version-range test') (built once from PyPI, then cached)"
    for version in $versions; do
      (t=$SECONDS; bash hack/build-verl-oracle.sh "$version" >/dev/null; took "verl $version runtime" "$t") &
      pids+=($!)
    done
    if [[ $mode == all ]]; then
      (t=$SECONDS; bash hack/build-ray-env.sh >/dev/null; took "older-Ray environment" "$t") &
      pids+=($!)
    fi
  fi
  stage "in the background: kube-apiserver, kubectl, etcd, helm (built once from Go modules, then cached)"
  (t=$SECONDS; bash hack/build-testbed-bins.sh >/dev/null; took "testbed binaries" "$t") &
  pids+=($!)
fi

if $venv_stale; then
  stage "installing the project and its test extras into .venv (uv, its cache in $CACHE/uv)"
  # uv (a test dependency already: hack/lock.sh) installs in a fraction of pip's time, from
  # the cache hack/release.sh shares; byte-compiled as pip would, since no process writes
  # bytecode where PYTHONDONTWRITEBYTECODE is set (each would compile Ray and the
  # Kubernetes client again on every start).
  UV_CACHE_DIR="$CACHE/uv" .venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python -e '.[test]' -e tests/testbed
  touch "$stamp"
fi
# The project's own modules are installed editable, so uv's --compile-bytecode leaves them
# out: without this every operator and `argus` process of the tests compiled them again
# (importing the operator and the CLI: 1.7 s of CPU from source, 1.1 s from bytecode).
# compileall rewrites only what changed since; a stale .pyc is never used (Python checks the
# source's time and size, and a process that finds it stale compiles in memory).
.venv/bin/python -m compileall -q operator/argus tests/testbed/argus_testbed >/dev/null
took "python environment" "$t0"
t0=$SECONDS
stage "the pinned verl releases' config trees (fetched once from the package index, then cached)"
bash hack/fetch-verl.sh >/dev/null
took "verl trees" "$t0"

for pid in "${pids[@]}"; do wait "$pid"; done
took "all (wall)" "$t_all"
