#!/usr/bin/env bash
# Builds the operator image from the repository's Dockerfile without Docker: buildah with
# chroot isolation and the vfs storage driver (no daemon, no network bridges: the build's
# RUN steps use the host's network, for PyPI only). The base is made here too, because no
# container registry is reachable from these machines: a Debian bookworm minbase root file
# system with Debian's CPython 3.11 (debootstrap from the Debian mirror), committed as a local
# image and passed to the Dockerfile by its digest, as the Dockerfile requires.
#
#   hack/build-image.sh [TAG]    (default localhost/argus-operator:<version>)
#
# Writes dist/argus-operator-<version>.oci.tar (an OCI archive: `skopeo copy
# oci-archive:... docker://registry/...` pushes it; ARGUS_IMAGE_ARCHIVE=0: not written, as in
# CI, where hack/release.sh writes the release's archive) and prints the sizes. Needs root and
# Debian's buildah and debootstrap (apt-get install buildah debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in buildah debootstrap; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing (apt-get install buildah debootstrap)" >&2; exit 1; }
done
version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
tag=${1:-localhost/argus-operator:$version}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE="${ARGUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/argus}/image"
B=(buildah --storage-driver vfs)
t0=$SECONDS
mkdir -p "$CACHE" dist

# 1. The base: bookworm minbase + python3 + python3-venv + CA certificates, once.
rootfs="$CACHE/rootfs-bookworm-python3"
if [[ ! -x "$rootfs/usr/bin/python3" ]]; then
  rm -rf "$rootfs.tmp"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs.tmp"/var/cache/apt/archives/*.deb "$rootfs.tmp"/var/lib/apt/lists/* "$rootfs.tmp"/usr/share/doc/* \
         "$rootfs.tmp"/usr/share/man/* "$rootfs.tmp"/usr/share/locale/* "$rootfs.tmp"/var/log/*
  chroot "$rootfs.tmp" dpkg-query -W -f '${Package}=${Version}\n' > "$CACHE/base-packages.txt"
  mv "$rootfs.tmp" "$rootfs"
fi
base=localhost/argus-base:bookworm-python3
if ! "${B[@]}" inspect --type image "$base" >/dev/null 2>&1; then
  ctr=$("${B[@]}" from scratch)
  "${B[@]}" copy --quiet "$ctr" "$rootfs/" / >/dev/null
  "${B[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /usr/bin/python3 "$ctr"
  "${B[@]}" commit --quiet --rm "$ctr" "$base" >/dev/null
fi
digest=$("${B[@]}" inspect --type image --format '{{.FromImageDigest}}' "$base")
echo "build-image: base $base@$digest ($(cut -d= -f1 "$CACHE/base-packages.txt" | wc -l) Debian packages; list in $CACHE/base-packages.txt)" >&2
t1=$SECONDS

# 2. The Dockerfile, as is. Where this machine reaches PyPI through a TLS-inspecting proxy
# (PIP_CERT names its CA bundle), the RUN steps see the bundle and a pip.conf naming it as
# read-only volumes: nothing of it is committed into the image.
trust=()
ca=${PIP_CERT:-${SSL_CERT_FILE:-}}
if [[ -n "$ca" && -f "$ca" ]]; then
  conf="$CACHE/pip.conf"
  printf '[global]\ncert = /run/argus-build/ca.pem\n' > "$conf"
  trust=(-v "$ca:/run/argus-build/ca.pem:ro" -v "$conf:/etc/pip.conf:ro")
fi
"${B[@]}" bud --quiet --isolation chroot --network host --pull-never --layers=false "${trust[@]}" \
  --build-arg "BASE_IMAGE=$base@$digest" -t "$tag" . >/dev/null
t2=$SECONDS
archive="dist/argus-operator-$version.oci.tar"
rm -f "$archive"
if [[ "${ARGUS_IMAGE_ARCHIVE:-1}" != 0 ]]; then
  "${B[@]}" push --quiet "$tag" "oci-archive:$archive:$tag" >/dev/null
  echo "build-image: $tag built in $((t2 - t1)) s (base $((t1 - t0)) s); $archive $(du -m "$archive" | cut -f1) MB compressed" >&2
else
  echo "build-image: $tag built in $((t2 - t1)) s (base $((t1 - t0)) s); no archive (ARGUS_IMAGE_ARCHIVE=0)" >&2
fi
"${B[@]}" images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -E "argus-(operator|base)" >&2 || true
echo "$tag"
