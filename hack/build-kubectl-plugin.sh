#!/usr/bin/env bash
# Builds the kubectl plugin archive for this machine's platform and Python:
#   dist/kubectl-argus_v<version>_<os>_<arch>.tar.gz
# holding `kubectl-argus` (a launcher) and lib/ (the argus package with pydantic, pyyaml,
# hydra-core and the kubernetes client, no Ray and no operator dependencies). hack/krew-manifest.py turns a
# release's archives into the krew manifest. The launcher runs the python3 on PATH, which
# must be the minor version built for (pydantic-core is compiled for it).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
version=$("$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64|arm64) arch=arm64 ;; *) echo "unsupported machine $(uname -m)" >&2; exit 1 ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The CLI's own dependencies only (the lower bounds of pyproject.toml): no kopf, no Ray.
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-compile --target "$work/lib" --no-deps .
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-compile --target "$work/lib" \
  'pydantic>=2.7' 'pyyaml>=6.0' 'hydra-core>=1.3' 'kubernetes>=30.1'
rm -rf "$work/lib/bin" "$work/lib"/*.dist-info/RECORD
cat > "$work/kubectl-argus" <<SH
#!/bin/sh
# kubectl argus $version: the Argus CLI, built for Python $pyver ($os/$arch).
here=\$(dirname "\$(readlink -f "\$0")")
if ! python3 -c 'import sys; sys.exit(f"{sys.version_info[0]}.{sys.version_info[1]}" != "$pyver")' 2>/dev/null; then
  echo "kubectl argus: needs python3 $pyver on PATH (this archive was built for it)" >&2
  exit 2
fi
exec python3 -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = "kubectl-argus"; from argus.cli import main; sys.exit(main())' "\$here/lib" "\$@"
SH
chmod +x "$work/kubectl-argus"
mkdir -p dist
out="dist/kubectl-argus_v${version}_${os}_${arch}.tar.gz"
# Reproducible: sorted names, fixed owner and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01 00:00Z' -C "$work" -czf "$out" kubectl-argus lib
echo "$out"
