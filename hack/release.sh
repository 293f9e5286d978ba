#!/usr/bin/env bash
# Builds everything a release publishes into one folder, with checksums (docs/releasing.md
# says how each is pushed; hack/check-release.py installs each as a user would):
#
#   argus-<chart version>.tgz                   the Helm chart (helm package; its README and
#                                               Artifact Hub annotations; image.repository =
#                                               --image-repository), for `helm push oci://...`
#   argus_operator-<V>-py3-none-any.whl         the CLI and operator for PyPI
#   argus_operator-<V>.tar.gz                   (uv build: the sdist, and the wheel built from it)
#   argus-operator-<V>.oci.tar                  the operator image, an OCI archive named
#                                               <image repository>:<V> (skopeo copy pushes it)
#   argus-operator-<V>.cdx.json                 the image's locked Python dependencies
#                                               (requirements/operator.txt) as a CycloneDX SBOM
#   kubectl-argus_v<V>_<os>_<arch>.tar.gz       the kubectl plugin for this machine's platform
#   argus.krew.yaml                             its krew manifest (uri and sha256 per archive)
#   LICENSE                                     the Apache-2.0 licence (also inside the chart,
#                                               the wheel and the sdist)
#   CHANGELOG.md                                the changelog, its first version section
#                                               this release's
#   SHA256SUMS                                  sha256 of all of the above
#
#   hack/release.sh VERSION --image-repository REGISTRY/NAME --download-url URL --homepage URL
#                   [--image LOCAL_TAG | --no-image] [--out DIR] [--unreleased]
#
# VERSION must be pyproject.toml's version and the chart's appVersion (bump them first);
# the chart keeps its own version (Chart.yaml). --image reuses an image already built by
# hack/build-image.sh (CI's image stage) instead of building it again; --no-image leaves the
# image out (machines without buildah). --download-url is where the krew archives will be
# downloaded from (the manifest's uri). Default folder: dist/release-VERSION (emptied first).
# CHANGELOG.md must hold a section `## [VERSION] - YYYY-MM-DD` (the release renames
# `## [Unreleased]` to it); --unreleased (CI's builds of main) builds from the
# `## [Unreleased]` section instead, stamped `## [VERSION] - unreleased` in the release's copy.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
die() { echo "release: $*" >&2; exit 2; }
log() { echo "release: $*" >&2; }

version="" image_repository="" download_url="" homepage="" image="" no_image="" out="" unreleased=""
while (($#)); do
  case "$1" in
    --image-repository) image_repository=${2:-}; shift 2 ;;
    --download-url) download_url=${2:-}; shift 2 ;;
    --homepage) homepage=${2:-}; shift 2 ;;
    --image) image=${2:-}; shift 2 ;;
    --no-image) no_image=1; shift ;;
    --out) out=${2:-}; shift 2 ;;
    --unreleased) unreleased=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [[ -z "$version" ]] || die "one VERSION only (got $version and $1)"; version=$1; shift ;;
  esac
done
[[ -n "$version" ]] || die "usage: hack/release.sh VERSION --image-repository REGISTRY/NAME --download-url URL --homepage URL [--image TAG | --no-image] [--out DIR]"
for pair in "image-repository:$image_repository" "download-url:$download_url" "homepage:$homepage"; do
  [[ -n "${pair#*:}" ]] || die "--${pair%%:*} is required (see --help)"
done
# The same rule the chart enforces: the registry is part of the name.
host=${image_repository%%/*}
if [[ "$host" == "$image_repository" || ! ( "$host" == localhost || "$host" == *.* || "$host" == *:* ) ]]; then
  die "--image-repository $image_repository is a short name: name the registry (registry.example.com/argus-operator)"
fi
last=${image_repository##*/}
[[ "$last" != *:* && "$image_repository" != *@* ]] || die "--image-repository $image_repository: no tag or digest (the release's tag is $version)"
[[ -z "$image" || -z "$no_image" ]] || die "--image and --no-image exclude each other"

PY=${PYTHON:-$REPO/.venv/bin/python}
UV=${UV:-$REPO/.venv/bin/uv}
[[ -x "$PY" && -x "$UV" ]] || die "needs the project's .venv with its test extras (bash hack/setup.sh --python-only)"
project_version=$("$PY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
app_version=$("$PY" -c 'import yaml; print(yaml.safe_load(open("charts/argus/Chart.yaml"))["appVersion"])')
chart_version=$("$PY" -c 'import yaml; print(yaml.safe_load(open("charts/argus/Chart.yaml"))["version"])')
[[ "$version" == "$project_version" ]] || die "VERSION $version is not pyproject.toml's version $project_version (bump it first)"
[[ "$version" == "$app_version" ]] || die "VERSION $version is not charts/argus/Chart.yaml's appVersion $app_version (bump it first)"
[[ -f LICENSE ]] || die "no LICENSE file"
# The changelog's section for this version (or, --unreleased, the Unreleased one), stamped.
changelog=$("$PY" hack/changelog.py CHANGELOG.md "$version" ${unreleased:+--unreleased}) || exit 2
CACHE="${ARGUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/argus}"
out=${out:-dist/release-$version}
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$SECONDS

# 1. The chart, its image default pointing at where this release's image is pushed.
bins=$(bash hack/build-testbed-bins.sh | tail -n 1)
HELM=${HELM:-$bins/helm}
cp -r charts/argus "$work/argus"
cp LICENSE "$work/argus/LICENSE"
"$PY" - "$work/argus" "$image_repository" "$version" <<'PY'
import pathlib, re, sys
chart, repository, version = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
for name, old, new in (("values.yaml", r"^  repository: localhost/argus-operator$", f"  repository: {repository}"),
                       ("Chart.yaml", r"^      image: localhost/argus-operator:\S*$", f"      image: {repository}:{version}")):
    path = chart / name
    text, n = re.subn(old, new, path.read_text(), flags=re.M)
    if n != 1:
        sys.exit(f"release: {path.name} does not hold exactly one line matching {old!r} to point at {repository}")
    path.write_text(text)
PY
# --kube-version: without it helm renders for v1.20.0, which the chart refuses (so lint would
# check no template).
"$HELM" lint --quiet --kube-version 1.34.4 "$work/argus" >/dev/null
"$HELM" package "$work/argus" --app-version "$version" --destination "$out" >/dev/null
chart="$out/argus-$chart_version.tgz"
# Read whole, then matched: `tar ... | grep -q` under pipefail fails at random (grep may exit
# before tar has written the rest, and tar's next write dies of SIGPIPE).
chart_readme=$(tar -xzOf "$chart" argus/README.md 2>/dev/null || true)
[[ "$chart_readme" == "# Argus chart"* ]] || die "$chart holds no README.md"
log "chart $(basename "$chart") (image $image_repository:$version)"

# 2. The sdist, and the wheel built from it (so the sdist is known to build), with the build
# backend from its hashed lock (requirements/build.txt): nothing unpinned is fetched.
UV_CACHE_DIR="$CACHE/uv" "$UV" build --quiet --build-constraints requirements/build.txt --require-hashes \
  --out-dir "$work/python" >/dev/null
for f in "argus_operator-$version.tar.gz" "argus_operator-$version-py3-none-any.whl"; do
  [[ -f "$work/python/$f" ]] || die "uv build made no $f: $(ls "$work/python")"
  mv "$work/python/$f" "$out/"
done
log "wheel and sdist"

# 3. The image as an OCI archive, named as it will be pushed.
if [[ -n "$no_image" ]]; then
  log "image left out (--no-image)"
else
  B=(buildah --storage-driver vfs)
  if [[ -z "$image" ]]; then
    image=$(bash hack/build-image.sh "$image_repository:$version" | tail -n 1)
  fi
  "${B[@]}" inspect --type image "$image" >/dev/null 2>&1 || die "--image $image: no such local image (hack/build-image.sh builds it)"
  "${B[@]}" push --quiet "$image" "oci-archive:$out/argus-operator-$version.oci.tar:$image_repository:$version" >/dev/null
  log "image $image -> argus-operator-$version.oci.tar ($image_repository:$version)"
fi

# 4. The SBOM of the image's locked dependencies: cyclonedx-py (pinned, in its own venv) reads
# the lock; the operator is the root component and depends on every locked package (the
# image's venv holds exactly them: the Dockerfile installs the lock with --no-deps).
CDX_VERSION=7.5.0
cdx="$CACHE/tools/cyclonedx-bom-$CDX_VERSION"
if [[ ! -x "$cdx/bin/cyclonedx-py" ]]; then
  rm -rf "$cdx"
  UV_CACHE_DIR="$CACHE/uv" "$UV" venv --quiet --python "$(command -v python3)" "$cdx"
  UV_CACHE_DIR="$CACHE/uv" "$UV" pip install --quiet --python "$cdx/bin/python" "cyclonedx-bom==$CDX_VERSION"
fi
sbom="$out/argus-operator-$version.cdx.json"
PYTHONWARNINGS=ignore "$cdx/bin/cyclonedx-py" requirements requirements/operator.txt --pyproject pyproject.toml \
  --mc-type application --sv 1.6 --output-reproducible -o "$work/sbom.json"
"$PY" - "$work/sbom.json" "$sbom" "$image_repository" "$version" <<'PY'
import json, sys
bom = json.load(open(sys.argv[1]))
root = bom["metadata"]["component"]
root["purl"] = f"pkg:pypi/argus-operator@{sys.argv[4]}"
root.setdefault("properties", []).extend([{"name": "argus:image", "value": f"{sys.argv[3]}:{sys.argv[4]}"},
                                          {"name": "argus:lock", "value": "requirements/operator.txt"}])
refs = [c["bom-ref"] for c in bom["components"]]
bom["dependencies"] = [{"ref": root["bom-ref"], "dependsOn": refs}] + [{"ref": r} for r in refs]
json.dump(bom, open(sys.argv[2], "w"), indent=2, sort_keys=True)
PY
log "SBOM $(basename "$sbom") ($("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["components"]))' "$sbom") locked packages, CycloneDX 1.6)"

# 5. The kubectl plugin for this platform and its krew manifest.
plugin=$(PYTHON=python3 bash hack/build-kubectl-plugin.sh | tail -n 1)
mv "$plugin" "$out/"
"$PY" hack/krew-manifest.py --version "$version" --url-base "$download_url" --homepage "$homepage" \
  -o "$out/argus.krew.yaml" "$out"/kubectl-argus_v"$version"_*.tar.gz >/dev/null
log "krew archive $(basename "$plugin") and argus.krew.yaml"

# 6. The licence and the changelog (its first version section is this release's).
cp LICENSE "$out/LICENSE"
printf '%s\n' "$changelog" > "$out/CHANGELOG.md"
log "LICENSE and CHANGELOG.md ($(grep -m1 '^## \[' "$out/CHANGELOG.md"))"

# 7. Checksums.
(cd "$out" && sha256sum -- * > SHA256SUMS)
log "done in $((SECONDS - t0)) s: $out"
ls -l "$out" >&2
echo "$out"
