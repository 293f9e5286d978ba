#!/usr/bin/env bash
# The image's dependency lock: requirements/operator.txt, every runtime dependency of the
# operator (pyproject.toml's [project] dependencies, none of the test extras) pinned with its
# hashes, for the image's platform (CPython 3.11, Linux x86_64, glibc). Made with uv's pip
# compile, which keeps the pins already in the file unless pyproject.toml's requirements no
# longer allow them, so re-running it changes nothing until a requirement changes.
#
#   hack/lock.sh            write the lock
#   hack/lock.sh --check    fail (exit 1, with the diff) if the lock does not match
#                           pyproject.toml: what .ci/run does
#   hack/lock.sh --upgrade  re-resolve everything to the newest allowed versions
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-.venv/bin/uv}"
LOCK=requirements/operator.txt
compile() {  # $1: output file; the rest: extra flags
  local out=$1; shift
  "$UV" pip compile pyproject.toml --quiet --generate-hashes --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --no-annotate --custom-compile-command "hack/lock.sh" \
    --output-file "$out" "$@"
}
case "${1:-}" in
  --check)
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    cp "$LOCK" "$tmp"
    compile "$tmp"
    if ! diff -u "$LOCK" "$tmp"; then
      echo "lock: $LOCK is stale: run hack/lock.sh and commit it" >&2
      exit 1
    fi
    echo "lock: $LOCK matches pyproject.toml"
    ;;
  --upgrade) compile "$LOCK" --upgrade ;;
  "") compile "$LOCK" ;;
  *) echo "usage: hack/lock.sh [--check|--upgrade]" >&2; exit 2 ;;
esac
