#!/usr/bin/env bash
# Fetches the verl releases of operator/argus/verl-releases.txt (package data: the product reads the same list) from the package index once, checks
# each wheel's sha256, and unpacks it into the cache that every clone shares, beside the
# testbed binaries:  $CACHE/verl/<version>/verl/...  (the whole wheel: 1-2 MB of Python).
# Argus reads only the config tree (verl/trainer/config) and verl/version/version from it;
# nothing of verl is imported and nothing is copied into this repository.
#
#   hack/fetch-verl.sh [VERSION...]     (default: every release in operator/argus/verl-releases.txt)
#
# ARGUS_CACHE_DIR moves the cache; PYTHON names the interpreter whose pip downloads (the
# Dockerfile bakes the trees into the image with it: /opt/argus/verl/<version>).
#
# Locked and atomic: a release counts as fetched once its folder exists, renamed into place
# last. Prints each release's folder, one a line.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${ARGUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/argus}"
RELEASES=operator/argus/verl-releases.txt
log() { printf '[fetch-verl] %s\n' "$*" >&2; }

sha_of() { awk -v v="$1" '!/^#/ && $1 == v {print $2}' "$RELEASES"; }
if [[ $# -eq 0 ]]; then
  mapfile -t versions < <(awk '!/^#/ && NF {print $1}' "$RELEASES")
else
  versions=("$@")
fi
mkdir -p "$CACHE/verl"
for version in "${versions[@]}"; do
  dest="$CACHE/verl/$version"
  if [[ ! -f $dest/verl/version/version ]]; then
    sha=$(sha_of "$version")
    [[ -n $sha ]] || { log "verl $version is not in $RELEASES (add it with its wheel's sha256)"; exit 1; }
    exec 9>"$CACHE/verl/.fetch.lock"
    flock 9
    if [[ ! -f $dest/verl/version/version ]]; then
      tmp=$(mktemp -d "$CACHE/verl/.fetch-$version.XXXXXX")
      trap 'rm -rf "$tmp"' EXIT
      log "fetching verl $version from the package index"
      "${PYTHON:-python3}" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        -d "$tmp/wheel" "verl==$version" >&2
      wheel=$(ls "$tmp"/wheel/verl-"$version"-*.whl)
      got=$(sha256sum "$wheel" | cut -d' ' -f1)
      [[ $got == "$sha" ]] || { log "verl $version: wheel sha256 $got, expected $sha"; exit 1; }
      "${PYTHON:-python3}" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$tmp/tree"
      got_version=$(tr -d '[:space:]' < "$tmp/tree/verl/version/version")
      [[ $got_version == "$version" ]] || { log "verl $version: the wheel says $got_version"; exit 1; }
      rm -rf "$dest"
      mv "$tmp/tree" "$dest"
      rm -rf "$tmp"
      trap - EXIT
    fi
    exec 9>&-
  fi
  echo "$dest"
done
