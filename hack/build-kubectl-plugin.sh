#!/usr/bin/env bash
# Builds the kubectl plugin archive for this machine's OS and architecture:
#   dist/kubectl-argus_v<version>_<os>_<arch>.tar.gz
# holding `kubectl-argus` (a launcher) and the argus package with the CLI's own dependencies
# (pydantic, pyyaml, hydra-core and the kubernetes client; no Ray, no kopf). hack/krew-manifest.py
# turns a release's archives into the krew manifest; hack/release.sh calls both.
#
# One archive serves every CPython the project supports (ARGUS_PLUGIN_PYTHONS, default
# 3.11 3.12 3.13 3.14), not one exact minor: the pure-Python packages are in lib/common, and
# each distribution that ships compiled code (pydantic-core, pyyaml, aiohttp, ...) is in
# lib/cp3XX once per minor, from that minor's manylinux/macOS wheel on PyPI (pip --only-binary
# --python-version --platform; nothing is compiled here). The launcher picks the first of
# python3, python3.14 ... python3.11 on PATH whose minor has a lib/cp3XX.
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
read -r -a minors <<<"${ARGUS_PLUGIN_PYTHONS:-3.11 3.12 3.13 3.14}"
version=$("$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
host=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64|arm64) arch=arm64 ;; *) echo "build-kubectl-plugin: unsupported machine $(uname -m)" >&2; exit 1 ;; esac
case "$os/$arch" in
  linux/amd64) platforms=(manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_28_x86_64) ;;
  linux/arm64) platforms=(manylinux_2_17_aarch64 manylinux2014_aarch64 manylinux_2_28_aarch64) ;;
  darwin/arm64) platforms=(macosx_11_0_arm64) ;;
  darwin/amd64) platforms=(macosx_10_12_x86_64 macosx_10_9_x86_64) ;;
esac
[[ " ${minors[*]} " == *" $host "* ]] || { echo "build-kubectl-plugin: $PYTHON is $host, not one of ${minors[*]}" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip=("$PYTHON" -m pip install --quiet --disable-pip-version-check --no-compile --no-warn-conflicts)
# 1. The whole set for the building Python (the lower bounds of pyproject.toml's CLI deps).
"${pip[@]}" --target "$work/host" --no-deps .
rm -rf "$work/host/bin"  # its console scripts: the launcher below replaces them
"${pip[@]}" --target "$work/host" 'pydantic>=2.7' 'pyyaml>=6.0' 'hydra-core>=1.3' 'kubernetes>=30.1'
# 2. Split it: a distribution whose wheel is not pure Python moves to lib/cp<host>, and the
# same version's wheel for every other minor goes to lib/cp3XX.
"$PYTHON" - "$work/host" "$work/lib" "$host" > "$work/binary.txt" <<'PY'
import pathlib, shutil, sys
src, lib, host = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3].replace(".", "")
common, own = lib / "common", lib / f"cp{host}"
common.mkdir(parents=True), own.mkdir(parents=True)
moved = set()
for info in sorted(src.glob("*.dist-info")):
    wheel = (info / "WHEEL").read_text()
    if "Root-Is-Purelib: true" in wheel:
        continue
    name, version = info.name[: -len(".dist-info")].rsplit("-", 1)
    print(f"{name}=={version}")
    for line in (info / "RECORD").read_text().splitlines():
        top = line.split(",", 1)[0].split("/", 1)[0]
        if top and top != ".." and (src / top).exists() and top not in moved:
            moved.add(top)
            shutil.move(src / top, own / top)
for entry in sorted(src.iterdir()):
    if entry.name != "bin":
        shutil.move(entry, common / entry.name)
PY
mapfile -t binary < "$work/binary.txt"
for minor in "${minors[@]}"; do
  [[ "$minor" == "$host" ]] && continue
  plat=(); for p in "${platforms[@]}"; do plat+=(--platform "$p"); done
  "${pip[@]}" --target "$work/lib/cp${minor/./}" --no-deps --only-binary=:all: \
    --implementation cp --python-version "$minor" --abi "cp${minor/./}" "${plat[@]}" "${binary[@]}"
done
find "$work/lib" -path '*.dist-info/RECORD' -delete
rm -rf "$work/lib"/*/bin
built="${minors[*]}"
cat > "$work/kubectl-argus" <<SH
#!/bin/sh
# kubectl argus $version ($os/$arch): the Argus CLI, for CPython ${built// /, }.
here=\$(dirname "\$(readlink -f "\$0")")
for py in python3 python3.14 python3.13 python3.12 python3.11; do
  tag=\$("\$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")' 2>/dev/null) || continue
  if [ -d "\$here/lib/\$tag" ]; then
    exec "\$py" -c 'import sys; sys.path[0:0] = sys.argv[1:3]; del sys.argv[1:3]; sys.argv[0] = "kubectl-argus"; from argus.cli import main; sys.exit(main())' "\$here/lib/\$tag" "\$here/lib/common" "\$@"
  fi
done
echo "kubectl argus: needs CPython ${built// /, } on PATH (as python3 or python3.X); found none of them" >&2
exit 2
SH
chmod +x "$work/kubectl-argus"
mkdir -p dist
out="dist/kubectl-argus_v${version}_${os}_${arch}.tar.gz"
# Reproducible: sorted names, fixed owner and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01 00:00Z' -C "$work" -czf "$out" kubectl-argus lib
echo "build-kubectl-plugin: $out ($(du -m "$out" | cut -f1) MB; CPython ${built// /, }; per-minor: ${binary[*]})" >&2
echo "$out"
