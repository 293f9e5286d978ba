#!/usr/bin/env bash
# Prints the base image reference pinned by digest, for the Dockerfile's BASE_IMAGE:
#   docker build --build-arg BASE_IMAGE="$(hack/pin-base-image.sh)" .
# Needs a reachable registry and skopeo, crane or docker buildx (these development machines
# have none: there hack/build-image.sh builds the base from Debian's packages instead).
set -euo pipefail
ref=${1:-docker.io/library/python:3.11-slim-bookworm}
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
echo "${ref%%:*}:${ref##*:}@$digest"
