#!/usr/bin/env bash
# The image's dependency lock: requirements/operator.txt, every runtime dependency of the
# operator (pyproject.toml's [project] dependencies, none of the test extras) pinned with its
# hashes, for the image's platform (CPython 3.11, Linux x86_64, glibc). Made with uv's pip
# compile, which keeps the pins already in the file unless pyproject.toml's requirements no
# longer allow them, so re-running it changes nothing until a requirement changes.
# And the build backend's lock: requirements/build.txt, pyproject.toml's [build-system]
# requires pinned with their hashes. Whatever builds the operator's wheel (the Dockerfile,
# hack/lock-install.sh, hack/release.sh) installs the backend from it and builds without
# build isolation (or, with uv, with it as hash-checked build constraints), so that no build
# fetches an unpinned setuptools.
#
#   hack/lock.sh            write the locks
#   hack/lock.sh --check    fail (exit 1, with the diff) if a lock does not match
#                           pyproject.toml: what .ci/run does
#   hack/lock.sh --upgrade  re-resolve everything to the newest allowed versions
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-.venv/bin/uv}"
LOCK=requirements/operator.txt
BUILD_LOCK=requirements/build.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# pyproject.toml's [build-system] requires, as a requirements file uv can compile.
python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' \
  > "$tmp/build-system.in"
compile() {  # $1: what to compile; $2: output file; the rest: extra flags
  local src=$1 out=$2; shift 2
  "$UV" pip compile "$src" --quiet --generate-hashes --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --no-annotate --custom-compile-command "hack/lock.sh" \
    --output-file "$out" "$@"
}
both() {  # the extra flags for both locks
  compile pyproject.toml "$LOCK" "$@"
  compile "$tmp/build-system.in" "$BUILD_LOCK" "$@"
}
case "${1:-}" in
  --check)
    stale=0
    for pair in "pyproject.toml:$LOCK" "$tmp/build-system.in:$BUILD_LOCK"; do
      src=${pair%%:*} lock=${pair#*:}
      cp "$lock" "$tmp/check.txt"
      compile "$src" "$tmp/check.txt"
      if ! diff -u "$lock" "$tmp/check.txt"; then
        echo "lock: $lock is stale: run hack/lock.sh and commit it" >&2
        stale=1
      fi
    done
    [[ $stale == 0 ]] || exit 1
    echo "lock: $LOCK and $BUILD_LOCK match pyproject.toml"
    ;;
  --upgrade) both --upgrade ;;
  "") both ;;
  *) echo "usage: hack/lock.sh [--check|--upgrade]" >&2; exit 2 ;;
esac
