#!/usr/bin/env bash
# Fetches KubeRay's own RayCluster CRD at the version pinned in hack/kuberay-version.txt, from
# KubeRay's Go module (github.com/ray-project/kuberay/ray-operator, config/crd/bases/) through
# the Go module proxy, into the shared cache (~/.cache/argus/kuberay/<version>/), as
# build-testbed-bins.sh caches its binaries. The module proxy is the one source these
# machines reach, and `go mod download` checks the module against the Go checksum database.
# tests/integration/test_kuberay.py dry-runs deploy/kuberay/raycluster.yaml against it.
#
# Prints the cached CRD file on its last line. Returns at once when it is cached.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="${ARGUS_KUBERAY_VERSION:-$(tr -d '[:space:]' < "$HERE/kuberay-version.txt")}"
CACHE="${ARGUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/argus}"
DEST="$CACHE/kuberay/$VERSION"
CRD="$DEST/ray.io_rayclusters.yaml"
MODULE="github.com/ray-project/kuberay/ray-operator"

log() { printf '[fetch-kuberay-crd] %s\n' "$*" >&2; }

if [[ -s "$CRD" ]]; then
  echo "$CRD"
  exit 0
fi
command -v go >/dev/null || { log "needs go (the Go module proxy is where KubeRay's CRD comes from)"; exit 1; }
mkdir -p "$DEST"
# Outside any module (a temp folder), so that no go.mod of ours is read or changed.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "downloading $MODULE@$VERSION from the Go module proxy"
info="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION")"
dir="$(printf '%s' "$info" | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or ""); sys.exit(1 if d.get("Error") else 0)')" || {
  log "go mod download failed: $info"; exit 1; }
src="$dir/config/crd/bases/ray.io_rayclusters.yaml"
[[ -s "$src" ]] || { log "$src is missing from the module"; exit 1; }
# Written under a temporary name and renamed: an interrupted copy is never taken as cached.
cp "$src" "$CRD.tmp.$$"
chmod 644 "$CRD.tmp.$$"
mv -f "$CRD.tmp.$$" "$CRD"
log "cached $CRD"
echo "$CRD"
