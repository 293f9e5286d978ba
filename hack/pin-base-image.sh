#!/usr/bin/env bash
# The base image's digest, recorded in one place: the Dockerfile's `ARG BASE_IMAGE=` line.
#
#   hack/pin-base-image.sh           print the tag's current reference pinned by digest
#   hack/pin-base-image.sh --write   and write it into the Dockerfile's ARG BASE_IMAGE
#   hack/pin-base-image.sh [--write] REF   another tag (default: the Dockerfile's, digest dropped)
#
# Needs a reachable registry and skopeo, crane or docker buildx (these development machines
# have none: there hack/build-image.sh builds the base from Debian's packages and passes its
# digest with --build-arg instead). A bot that updates Dockerfile digests does the same as
# --write.
set -euo pipefail
cd "$(dirname "$0")/.."
write=
if [[ "${1:-}" == --write ]]; then write=1; shift; fi
recorded=$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)
[[ -n "$recorded" ]] || { echo "pin-base-image: the Dockerfile has no 'ARG BASE_IMAGE=' line" >&2; exit 1; }
ref=${1:-${recorded%%@*}}
ref=${ref%%@*}
if command -v skopeo >/dev/null; then
  digest=$(skopeo inspect --format '{{.Digest}}' "docker://$ref")
elif command -v crane >/dev/null; then
  digest=$(crane digest "$ref")
elif docker buildx version >/dev/null 2>&1; then
  digest=$(docker buildx imagetools inspect --format '{{json .Manifest.Digest}}' "$ref" | tr -d '"')
else
  echo "pin-base-image: needs skopeo, crane or docker buildx" >&2
  exit 1
fi
[[ "$digest" == sha256:* ]] || { echo "pin-base-image: $ref: no digest in the registry's answer ($digest)" >&2; exit 1; }
pinned="$ref@$digest"
if [[ -n "$write" ]]; then
  sed -i "s|^ARG BASE_IMAGE=.*|ARG BASE_IMAGE=$pinned|" Dockerfile
  echo "pin-base-image: Dockerfile: $recorded -> $pinned" >&2
fi
echo "$pinned"
